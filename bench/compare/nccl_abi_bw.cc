// nccl_abi_bw: AllReduce (float sum), send/recv or AlltoAll of RANKS ranks
// of this process on GPU 0, through whichever libnccl.so.2 it is given,
// found with dlopen, so the same binary times NVIDIA's NCCL and gyre's
// drop-in library side by side (NCCL refuses two ranks on one GPU, so one
// rank is where the two meet). Beside each size it times a device-to-device
// cudaMemcpyAsync of the same bytes, the bound an out-of-place one-rank call
// can reach. Send/recv: every rank sends to the next and receives from the
// previous (with one rank, to itself).
//
//   nccl_abi_bw LIBNCCL [MIN_BYTES=8] [MAX_BYTES=1073741824] [allreduce|sendrecv|alltoall] [RANKS=1]
//               [eager|graph]
//
// graph: the out-of-place time is of the same calls captured into one CUDA
// graph per rank's stream (as nccl-tests -G captures) and launched once per
// timing, divided by the calls it holds.
//
// Columns: size (per rank), out-of-place time, algbw and busbw (nccl-tests'
// factors), in-place time, copy time and bandwidth, and the number of wrong
// elements of the out-of-place results.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/cuda_ok.h"
#include "nccl.h"

namespace {

struct Nccl {
  decltype(&ncclGetVersion) getVersion;
  decltype(&ncclCommInitAll) initAll;
  decltype(&ncclAllReduce) allReduce;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) groupStart = nullptr;
  decltype(&ncclGroupEnd) groupEnd = nullptr;
  decltype(&ncclAlltoAll) alltoAll = nullptr;
  decltype(&ncclCommDestroy) destroy;
  decltype(&ncclGetErrorString) errorString;
};

template <typename Fn>
void resolve(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*fn) {
    std::fprintf(stderr, "nccl_abi_bw: %s not found: %s\n", name, dlerror());
    std::exit(2);
  }
}

// Mean microseconds per call of `run` over `iters` calls after `warmup`.
template <typename Run>
double timeUs(cudaStream_t stream, int warmup, int iters, Run run) {
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) run();
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) run();
  CUDA_OK(cudaEventRecord(stop, stream));
  CUDA_OK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1000.0 / iters;
}

enum class Op { AllReduce, SendRecv, AlltoAll };

// The ranks of this process, each with its stream and buffers.
struct Ranks {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<float*> send, recv;
  int n() const { return static_cast<int>(comms.size()); }
};

// One call of `op` on every rank, `count` floats per rank (AlltoAll: per
// peer block), inputs from `in`, outputs into `out` (one of send/recv).
ncclResult_t runOp(const Nccl& nccl, Op op, Ranks& k, bool inPlace, size_t count) {
  const int n = k.n();
  ncclResult_t r = nccl.groupStart ? nccl.groupStart() : ncclSuccess;
  for (int i = 0; i < n && r == ncclSuccess; ++i) {
    const float* in = inPlace ? k.recv[i] : k.send[i];
    float* out = k.recv[i];
    switch (op) {
      case Op::AllReduce: r = nccl.allReduce(in, out, count, ncclFloat32, ncclSum, k.comms[i], k.streams[i]); break;
      case Op::AlltoAll: r = nccl.alltoAll(in, out, count, ncclFloat32, k.comms[i], k.streams[i]); break;
      case Op::SendRecv:
        // In place has no meaning for a send to another rank: out of place.
        r = nccl.send(k.send[i], count, ncclFloat32, (i + 1) % n, k.comms[i], k.streams[i]);
        if (r == ncclSuccess) r = nccl.recv(out, count, ncclFloat32, (i + n - 1) % n, k.comms[i], k.streams[i]);
        break;
    }
  }
  ncclResult_t end = nccl.groupEnd ? nccl.groupEnd() : ncclSuccess;
  return r != ncclSuccess ? r : end;
}

// Element i of rank r's input.
float inputAt(int r, size_t i) { return static_cast<float>(i % 1000) + static_cast<float>(r); }

// What rank r's output element i must be after `op` over n ranks.
float expectedAt(Op op, int n, int r, size_t count, size_t i) {
  switch (op) {
    case Op::AllReduce:
      return static_cast<float>(n) * static_cast<float>(i % 1000) + static_cast<float>(n * (n - 1) / 2);
    case Op::SendRecv: return inputAt((r + n - 1) % n, i);
    case Op::AlltoAll: {
      const size_t p = i / count, j = i % count;  // block p came from rank p: its block r
      return inputAt(static_cast<int>(p), r * count + j);
    }
  }
  return 0;
}

// Mean microseconds per call of `run` over `iters` calls after `warmup`,
// from rank 0's stream once every rank's stream has joined it.
template <typename Run>
double timeUs(Ranks& k, int warmup, int iters, Run run) {
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreateWithFlags(&start, cudaEventDefault));
  CUDA_OK(cudaEventCreateWithFlags(&stop, cudaEventDefault));
  std::vector<cudaEvent_t> joins(k.n());
  for (cudaEvent_t& e : joins) CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (int i = 0; i < warmup; ++i) run();
  for (cudaStream_t s : k.streams) CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaEventRecord(start, k.streams[0]));
  for (int r = 1; r < k.n(); ++r) CUDA_OK(cudaStreamWaitEvent(k.streams[r], start, 0));
  for (int i = 0; i < iters; ++i) run();
  for (int r = 1; r < k.n(); ++r) {
    CUDA_OK(cudaEventRecord(joins[r], k.streams[r]));
    CUDA_OK(cudaStreamWaitEvent(k.streams[0], joins[r], 0));
  }
  CUDA_OK(cudaEventRecord(stop, k.streams[0]));
  CUDA_OK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (cudaEvent_t e : joins) cudaEventDestroy(e);
  return ms * 1000.0 / iters;
}

// Microseconds per call when `iters` calls of `run` are captured into one
// graph per rank's stream and the graphs are launched together.
template <typename Run>
double timeGraphUs(Ranks& k, int iters, Run run) {
  const int n = k.n();
  std::vector<cudaGraph_t> graphs(n);
  std::vector<cudaGraphExec_t> execs(n);
  for (cudaStream_t s : k.streams) CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < iters; ++i) run();
  for (int r = 0; r < n; ++r) CUDA_OK(cudaStreamEndCapture(k.streams[r], &graphs[r]));
  for (int r = 0; r < n; ++r) CUDA_OK(cudaGraphInstantiate(&execs[r], graphs[r], 0));
  auto launch = [&] {
    for (int r = 0; r < n; ++r) CUDA_OK(cudaGraphLaunch(execs[r], k.streams[r]));
  };
  const double us = timeUs(k, 1, 1, launch) / iters;
  for (int r = 0; r < n; ++r) {
    cudaGraphExecDestroy(execs[r]);
    cudaGraphDestroy(graphs[r]);
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: nccl_abi_bw LIBNCCL [MIN_BYTES] [MAX_BYTES] [allreduce|sendrecv|alltoall] [RANKS] "
                 "[eager|graph]\n");
    return 2;
  }
  const size_t minBytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 8;
  const size_t maxBytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : size_t(1) << 30;
  const std::string opName = argc > 4 ? argv[4] : "allreduce";
  const int nranks = argc > 5 ? std::atoi(argv[5]) : 1;
  const bool graphMode = argc > 6 && std::string(argv[6]) == "graph";
  if (nranks < 1 || nranks > 64) {
    std::fprintf(stderr, "nccl_abi_bw: RANKS must be 1..64\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "nccl_abi_bw: %s\n", dlerror());
    return 2;
  }
  Nccl nccl;
  resolve(lib, "ncclGetVersion", &nccl.getVersion);
  resolve(lib, "ncclCommInitAll", &nccl.initAll);
  resolve(lib, "ncclAllReduce", &nccl.allReduce);
  resolve(lib, "ncclCommDestroy", &nccl.destroy);
  resolve(lib, "ncclGetErrorString", &nccl.errorString);
  Op op = Op::AllReduce;
  if (opName == "sendrecv") {
    op = Op::SendRecv;
    resolve(lib, "ncclSend", &nccl.send);
    resolve(lib, "ncclRecv", &nccl.recv);
  } else if (opName == "alltoall") {
    op = Op::AlltoAll;
    resolve(lib, "ncclAlltoAll", &nccl.alltoAll);
  } else if (opName != "allreduce") {
    std::fprintf(stderr, "nccl_abi_bw: unknown operation %s (allreduce, sendrecv, alltoall)\n", opName.c_str());
    return 2;
  }
  if (op == Op::SendRecv || nranks > 1) {
    resolve(lib, "ncclGroupStart", &nccl.groupStart);
    resolve(lib, "ncclGroupEnd", &nccl.groupEnd);
  }
  int version = 0;
  nccl.getVersion(&version);
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(nccl.allReduce), &info);
  std::printf("# library %s (version code %d), %s, %d rank(s) on GPU 0%s\n",
              info.dli_fname ? info.dli_fname : argv[1], version, opName.c_str(), nranks,
              graphMode ? ", out of place captured in CUDA graphs" : "");

  CUDA_OK(cudaSetDevice(0));
  Ranks k;
  k.comms.assign(nranks, nullptr);
  std::vector<int> devs(nranks, 0);
  ncclResult_t r = nccl.initAll(k.comms.data(), nranks, devs.data());
  if (r != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitAll of %d rank(s) on GPU 0: %s\n", nranks, nccl.errorString(r));
    return 1;
  }
  std::vector<float> host(maxBytes / sizeof(float));
  for (int i = 0; i < nranks; ++i) {
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    k.streams.push_back(s);
    float *send = nullptr, *recv = nullptr;
    CUDA_OK(cudaMalloc(&send, maxBytes));
    CUDA_OK(cudaMalloc(&recv, maxBytes));
    for (size_t e = 0; e < host.size(); ++e) host[e] = inputAt(i, e);
    CUDA_OK(cudaMemcpy(send, host.data(), maxBytes, cudaMemcpyHostToDevice));
    k.send.push_back(send);
    k.recv.push_back(recv);
  }
  // From pageable memory the copy may return before the device is written,
  // and the non-blocking streams below do not wait for the legacy stream.
  CUDA_OK(cudaDeviceSynchronize());
  // nccl-tests' bus bandwidth factors.
  const double busFactor = op == Op::AllReduce ? 2.0 * (nranks - 1) / nranks
                           : op == Op::AlltoAll ? double(nranks - 1) / nranks : 1.0;

  std::printf("#%11s %10s %8s %8s %10s %10s %8s %8s\n", "size (B)", "oop (us)", "algbw", "busbw", "ip (us)",
              "copy (us)", "copybw", "#wrong");
  int failed = 0;
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
    const size_t elems = bytes / sizeof(float);
    // AlltoAll: `bytes` per rank, in one block per peer.
    const size_t count = op == Op::AlltoAll ? elems / nranks : elems;
    const size_t moved = op == Op::AlltoAll ? count * nranks * sizeof(float) : count * sizeof(float);
    const int iters = bytes <= (size_t(1) << 20) ? 100 : 20;
    r = ncclSuccess;
    auto outOfPlace = [&] {
      if (r == ncclSuccess) r = runOp(nccl, op, k, false, count);
    };
    double oop = graphMode ? timeGraphUs(k, iters, outOfPlace) : timeUs(k, 5, iters, outOfPlace);
    for (int i = 0; i < nranks; ++i) CUDA_OK(cudaMemsetAsync(k.recv[i], 0xff, bytes, k.streams[i]));
    if (r == ncclSuccess) r = runOp(nccl, op, k, false, count);
    size_t wrong = 0;
    std::vector<float> out(moved / sizeof(float));
    for (int i = 0; i < nranks; ++i) {
      CUDA_OK(cudaStreamSynchronize(k.streams[i]));
      CUDA_OK(cudaMemcpy(out.data(), k.recv[i], moved, cudaMemcpyDeviceToHost));
      for (size_t e = 0; e < out.size(); ++e) wrong += out[e] != expectedAt(op, nranks, i, count, e);
    }
    // In place rewrites the inputs: refresh them only after the timing.
    double ip = timeUs(k, 5, iters, [&] {
      if (r == ncclSuccess) r = runOp(nccl, op, k, true, count);
    });
    double copy = timeUs(k, 5, iters, [&] {
      CUDA_OK(cudaMemcpyAsync(k.recv[0], k.send[0], moved, cudaMemcpyDeviceToDevice, k.streams[0]));
    });
    if (r != ncclSuccess) {
      std::printf("%s of %zu bytes failed: %s\n", opName.c_str(), bytes, nccl.errorString(r));
      return 1;
    }
    failed += wrong != 0;
    const double algbw = moved / oop / 1e3;
    std::printf("%12zu %10.2f %8.1f %8.1f %10.2f %10.2f %8.1f %8zu\n", moved, oop, algbw, algbw * busFactor, ip,
                copy, moved / copy / 1e3, wrong);
  }
  for (ncclComm_t c : k.comms) nccl.destroy(c);
  return failed ? 1 : 0;
}
