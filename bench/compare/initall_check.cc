// Several ranks in one process on one GPU (ncclCommInitAll with a repeated
// device, which NCCL refuses): every collective, datatype and op (and a
// PreMulSum with each rank's own scalar), in and out of place, at counts that are 1, prime, span pipeline chunks and are not
// divisible by the rank count, checked against bench/common's exact patterns.
// Each rank gets its own stream; a group issues one call per rank.
//
//   initall_check [NRANKS=2] [MAX_COUNT=1048583]
//   initall_check NRANKS --bench [MAX_BYTES=268435456 [MIN_BYTES=8 [FACTOR=4]]]
//   initall_check NRANKS --graph
// The second form times in-place float sum AllReduce from 8 B up (x4 each
// row), all ranks issued in one group per iteration, and prints nccl-tests
// columns (time per call, algbw, busbw = algbw * 2(n-1)/n).
// The third form captures one group of out-of-place float sum AllReduces (a
// graph per rank's stream) and replays each graph three times, poisoning the
// outputs before every replay, so a replay that does no work fails the check.
// Prints one line per failing case and a summary; exit status 1 on any wrong
// element or failed call. Needs a CUDA device, or GYRE_FAKE_CUDA=2 (gyre's
// fake runtime, whose calls complete before returning: then buffers are host
// memory and the CUDA calls below are skipped), which is how the checker
// itself is tested without a GPU.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/check.h"
#include "common/datatypes.h"
#include "common/cuda_ok.h"
#include "gyre.h"

using namespace gyre_bench;

namespace {

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter };
const char* collName(Coll c) {
  const char* names[] = {"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter"};
  return names[static_cast<int>(c)];
}
bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }

struct Rank {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* in = nullptr;
  void* out = nullptr;
};

// The few CUDA calls the check needs, or their host equivalents on the fake.
bool fake() {
  const char* v = std::getenv("GYRE_FAKE_CUDA");
  return v && std::strcmp(v, "2") == 0;
}
// Both wait for the device: cudaMemset and a cudaMemcpy from pageable memory
// may return before the device is written, and the ranks' non-blocking
// streams do not wait for the legacy stream.
void copyTo(void* dst, const void* src, size_t bytes) {
  if (fake()) std::memcpy(dst, src, bytes);
  else {
    CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    CUDA_OK(cudaDeviceSynchronize());
  }
}
void fill(void* dst, int value, size_t bytes) {
  if (fake()) std::memset(dst, value, bytes);
  else {
    CUDA_OK(cudaMemset(dst, value, bytes));
    CUDA_OK(cudaDeviceSynchronize());
  }
}
void* deviceBuffer(size_t bytes) {
  void* p = nullptr;
  if (fake()) p = std::malloc(bytes);
  else CUDA_OK(cudaMalloc(&p, bytes));
  return p;
}
void freeBuffer(void* p) {
  if (fake()) std::free(p);
  else cudaFree(p);
}
void synchronize(cudaStream_t s) {
  if (!fake()) CUDA_OK(cudaStreamSynchronize(s));
}

// A PreMulSum per rank (ncclRedOpCreatePreMulSum): rank r multiplies its
// input by its own scalar r + 1, so the sum of the products stays an exact
// integer for the types checked. Scalars by value or in device memory.
struct PreMulSums {
  std::vector<ncclRedOp_t> ops;
  std::vector<int64_t> scalars;
  std::vector<void*> deviceScalars;
  const char* name = "";
};

bool makePreMulSums(std::vector<Rank>& ranks, ncclDataType_t type, ncclScalarResidence_t residence,
                    PreMulSums* out) {
  const int n = static_cast<int>(ranks.size());
  out->name = residence == ncclScalarDevice ? "premulsum(device scalar)" : "premulsum(host scalar)";
  for (int r = 0; r < n; ++r) {
    const int64_t s = r + 1;
    unsigned char bytes[8] = {};
    storeInteger(bytes, 0, type, s);
    void* where = bytes;
    if (residence == ncclScalarDevice) {
      where = deviceBuffer(8);
      copyTo(where, bytes, 8);
      out->deviceScalars.push_back(where);
    }
    ncclRedOp_t op;
    if (ncclRedOpCreatePreMulSum(&op, where, type, residence, ranks[r].comm) != ncclSuccess) {
      std::printf("FAIL ncclRedOpCreatePreMulSum: %s\n", ncclGetLastError(ranks[r].comm));
      return false;
    }
    out->ops.push_back(op);
    out->scalars.push_back(s);
  }
  return true;
}

void destroyPreMulSums(std::vector<Rank>& ranks, PreMulSums* p) {
  for (size_t r = 0; r < p->ops.size(); ++r) ncclRedOpDestroy(p->ops[r], ranks[r].comm);
  for (void* d : p->deviceScalars) freeBuffer(d);
}

// Runs one case on every rank; returns the wrong elements (or 1 for a failed
// call). With `pms`, every rank reduces with its own PreMulSum instead of `op`.
size_t runCase(std::vector<Rank>& ranks, Coll coll, ncclDataType_t type, ncclRedOp_t op, size_t count, bool inPlace,
               const PreMulSums* pms = nullptr) {
  const int n = static_cast<int>(ranks.size());
  const size_t es = typeSize(type), root = static_cast<size_t>(n - 1);
  const size_t inCount = coll == Coll::ReduceScatter ? count * n : count;
  const size_t outCount = coll == Coll::AllGather ? count * n : count;
  CheckPattern p(type, reduces(coll) && !pms ? op : ncclSum, n);
  auto reducedAt = [&](size_t i) -> int64_t {
    if (!pms) return p.reduced(i);
    int64_t sum = 0;
    for (int r = 0; r < n; ++r) sum += pms->scalars[r] * p.input(r, i);
    return sum;
  };
  std::vector<char> host(std::max(inCount, outCount) * es);
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[r];
    fill(k.out, 0xff, outCount * es);
    // In place: the input is (a block of) the output buffer.
    char* in = static_cast<char*>(inPlace ? k.out : k.in);
    if (inPlace && coll == Coll::AllGather) in += r * count * es;
    fillInput(host.data(), inCount, p, r, 0);
    copyTo(in, host.data(), inCount * es);
  }
  ncclGroupStart();
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[r];
    if (pms) op = pms->ops[r];
    char* in = static_cast<char*>(inPlace ? k.out : k.in);
    if (inPlace && coll == Coll::AllGather) in += r * count * es;
    char* out = static_cast<char*>(k.out);
    if (inPlace && coll == Coll::ReduceScatter) out += r * count * es;
    switch (coll) {
      case Coll::AllReduce: ncclAllReduce(in, out, count, type, op, k.comm, k.stream); break;
      case Coll::Broadcast: ncclBroadcast(in, out, count, type, int(root), k.comm, k.stream); break;
      case Coll::Reduce: ncclReduce(in, out, count, type, op, int(root), k.comm, k.stream); break;
      case Coll::AllGather: ncclAllGather(in, out, count, type, k.comm, k.stream); break;
      case Coll::ReduceScatter: ncclReduceScatter(in, out, count, type, op, k.comm, k.stream); break;
    }
  }
  if (ncclGroupEnd() != ncclSuccess) {
    std::printf("FAIL %s %s %s count %zu: %s\n", collName(coll), typeName(type), opName(op), count,
                ncclGetLastError(nullptr));
    return 1;
  }
  size_t wrong = 0;
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[r];
    synchronize(k.stream);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(k.comm, &async);
    if (async != ncclSuccess) {
      std::printf("FAIL %s: rank %d async error: %s\n", collName(coll), r, ncclGetLastError(k.comm));
      return 1;
    }
    const char* out = static_cast<const char*>(k.out);
    if (inPlace && coll == Coll::ReduceScatter) out += r * count * es;
    if (coll == Coll::Reduce && size_t(r) != root) continue;
    copyTo(host.data(), out, outCount * es);
    switch (coll) {
      case Coll::AllReduce:
      case Coll::Reduce: wrong += countWrong(host.data(), count, p, reducedAt); break;
      case Coll::Broadcast:
        wrong += countWrong(host.data(), count, p, [&](size_t i) { return p.input(int(root), i); });
        break;
      case Coll::AllGather:
        wrong += countWrong(host.data(), outCount, p, [&](size_t i) { return p.input(int(i / count), i % count); });
        break;
      case Coll::ReduceScatter:
        wrong += countWrong(host.data(), count, p, [&](size_t i) { return reducedAt(r * count + i); });
        break;
    }
  }
  if (wrong)
    std::printf("WRONG %s %s %s count %zu %s: %zu elements\n", collName(coll), typeName(type),
                pms ? pms->name : opName(op), count, inPlace ? "in place" : "out of place", wrong);
  return wrong;
}

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One group of in-place AllReduces, one per rank, each on its stream.
void allReduceAll(std::vector<Rank>& ranks, size_t count) {
  ncclGroupStart();
  for (Rank& k : ranks) ncclAllReduce(k.out, k.out, count, ncclFloat32, ncclSum, k.comm, k.stream);
  ncclGroupEnd();
}

int bench(std::vector<Rank>& ranks, size_t minBytes, size_t maxBytes, size_t factor) {
  const int n = static_cast<int>(ranks.size());
  std::printf("# %d ranks on one device in one process, in-place float sum AllReduce\n", n);
  std::printf("#%11s %12s %10s %8s %8s\n", "size (B)", "count", "time (us)", "algbw", "busbw");
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
    const size_t count = bytes / 4;
    const int iters = bytes <= (1 << 20) ? 50 : 10;
    for (int w = 0; w < 3; ++w) allReduceAll(ranks, count);
    for (Rank& k : ranks) synchronize(k.stream);
    double start = nowUs();
    for (int i = 0; i < iters; ++i) allReduceAll(ranks, count);
    for (Rank& k : ranks) synchronize(k.stream);
    double us = (nowUs() - start) / iters;
    double algbw = bytes / us / 1e3;
    std::printf("%12zu %12zu %10.2f %8.2f %8.2f\n", bytes, count, us, algbw, algbw * 2.0 * (n - 1) / n);
  }
  for (Rank& k : ranks) {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(k.comm, &async);
    if (async != ncclSuccess) {
      std::printf("async error: %s\n", ncclGetLastError(k.comm));
      return 1;
    }
  }
  return 0;
}

// CUDA-graph capture and replay: one graph per rank's stream, captured
// together (a group over all ranks), replayed together.
int graphCheck(std::vector<Rank>& ranks, size_t maxCount) {
  const int n = static_cast<int>(ranks.size());
  CheckPattern p(ncclFloat32, ncclSum, n);
  size_t failed = 0, cases = 0;
  for (size_t count : {size_t(1), size_t(13), std::min<size_t>(65537, maxCount), maxCount}) {
    std::vector<char> host(count * 4);
    for (int r = 0; r < n; ++r) {
      fillInput(host.data(), count, p, r, 0);
      copyTo(ranks[r].in, host.data(), count * 4);
    }
    std::vector<cudaGraph_t> graphs(n);
    std::vector<cudaGraphExec_t> execs(n);
    // Global, PyTorch's default: gyre's own threads must not break it either.
    for (Rank& k : ranks) CUDA_OK(cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeGlobal));
    ncclGroupStart();
    for (Rank& k : ranks) ncclAllReduce(k.in, k.out, count, ncclFloat32, ncclSum, k.comm, k.stream);
    ncclResult_t captured = ncclGroupEnd();
    for (int r = 0; r < n; ++r) CUDA_OK(cudaStreamEndCapture(ranks[r].stream, &graphs[r]));
    ++cases;
    if (captured != ncclSuccess) {
      std::printf("FAIL graph capture count %zu: %s\n", count, ncclGetLastError(nullptr));
      ++failed;
      continue;
    }
    for (int r = 0; r < n; ++r) CUDA_OK(cudaGraphInstantiate(&execs[r], graphs[r], 0));
    for (int replay = 0; replay < 3; ++replay) {
      for (Rank& k : ranks) fill(k.out, 0xff, count * 4);
      for (int r = 0; r < n; ++r) CUDA_OK(cudaGraphLaunch(execs[r], ranks[r].stream));
      size_t wrong = 0;
      for (Rank& k : ranks) {
        synchronize(k.stream);
        copyTo(host.data(), k.out, count * 4);
        wrong += countWrong(host.data(), count, p, [&](size_t i) { return p.reduced(i); });
      }
      if (wrong) {
        std::printf("WRONG graph replay %d count %zu: %zu elements\n", replay, count, wrong);
        ++failed;
        break;
      }
    }
    for (int r = 0; r < n; ++r) {
      cudaGraphExecDestroy(execs[r]);
      cudaGraphDestroy(graphs[r]);
    }
  }
  std::printf("initall_check --graph: %d ranks, %zu captures, %zu failed\n", n, cases, failed);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2;
  const bool timing = argc > 2 && std::strcmp(argv[2], "--bench") == 0;
  const bool graph = argc > 2 && std::strcmp(argv[2], "--graph") == 0;
  const size_t maxBytes = timing && argc > 3 ? std::strtoull(argv[3], nullptr, 10) : size_t(256) << 20;
  const size_t minBytes = timing && argc > 4 ? std::max<size_t>(4, std::strtoull(argv[4], nullptr, 10)) : 8;
  const size_t factor = timing && argc > 5 ? std::max<size_t>(2, std::strtoull(argv[5], nullptr, 10)) : 4;
  const size_t maxCount = timing ? maxBytes / 4 : argc > 2 && !graph ? std::strtoull(argv[2], nullptr, 10) : 1048583;
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n, 0);
  if (ncclCommInitAll(comms.data(), n, devs.data()) != ncclSuccess) {
    std::printf("ncclCommInitAll(%d ranks on device 0) failed: %s\n", n, ncclGetLastError(nullptr));
    return 1;
  }
  const ncclDataType_t types[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
                                  ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  const size_t counts[] = {1, 13, std::min<size_t>(65537, maxCount), maxCount};
  std::vector<Rank> ranks(n);
  for (int r = 0; r < n; ++r) {
    ranks[r].comm = comms[r];
    if (fake()) ranks[r].stream = reinterpret_cast<cudaStream_t>(uintptr_t(r + 1));
    else CUDA_OK(cudaStreamCreateWithFlags(&ranks[r].stream, cudaStreamNonBlocking));
    ranks[r].in = deviceBuffer(maxCount * n * 8);
    ranks[r].out = deviceBuffer(maxCount * n * 8);
  }
  if (timing || graph) {
    if (graph && fake()) {
      std::printf("initall_check --graph needs a CUDA device (the fake runtime does not capture)\n");
      return 2;
    }
    int rc = graph ? graphCheck(ranks, maxCount) : bench(ranks, minBytes, maxBytes, factor);
    for (Rank& k : ranks) {
      freeBuffer(k.in);
      freeBuffer(k.out);
      ncclCommDestroy(k.comm);
    }
    return rc;
  }
  size_t cases = 0, failed = 0;
  for (Coll coll : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter})
    for (ncclDataType_t type : types)
      for (ncclRedOp_t op : ops) {
        if (!reduces(coll) && op != ncclSum) continue;
        for (size_t count : counts)
          for (bool inPlace : {false, true}) {
            ++cases;
            if (runCase(ranks, coll, type, op, count, inPlace)) ++failed;
          }
      }
  // PreMulSum with a different scalar on every rank, by value and in device
  // memory.
  for (ncclScalarResidence_t residence : {ncclScalarHostImmediate, ncclScalarDevice})
    for (ncclDataType_t type : {ncclFloat32, ncclFloat64, ncclFloat16, ncclInt32}) {
      PreMulSums pms;
      if (!makePreMulSums(ranks, type, residence, &pms)) return 1;
      for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter})
        for (size_t count : counts)
          for (bool inPlace : {false, true}) {
            ++cases;
            if (runCase(ranks, coll, type, ncclSum, count, inPlace, &pms)) ++failed;
          }
      destroyPreMulSums(ranks, &pms);
    }
  for (Rank& k : ranks) {
    freeBuffer(k.in);
    freeBuffer(k.out);
    if (!fake()) cudaStreamDestroy(k.stream);
    ncclCommDestroy(k.comm);
  }
  std::printf("initall_check: %d ranks on one device, %zu cases, %zu failed\n", n, cases, failed);
  return failed ? 1 : 0;
}
