// Several ranks in one process on one GPU (ncclCommInitAll with a repeated
// device, which NCCL refuses): every collective, datatype and op, in and out
// of place, at counts that are 1, prime, span pipeline chunks and are not
// divisible by the rank count, checked against bench/common's exact patterns.
// Each rank gets its own stream; a group issues one call per rank.
//
//   initall_check [NRANKS=2] [MAX_COUNT=1048583]
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
#include <cstring>
#include <vector>

#include "common/check.h"
#include "common/datatypes.h"
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

#define CUDA_OK(call)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

// The few CUDA calls the check needs, or their host equivalents on the fake.
bool fake() {
  const char* v = std::getenv("GYRE_FAKE_CUDA");
  return v && std::strcmp(v, "2") == 0;
}
void copyTo(void* dst, const void* src, size_t bytes) {
  if (fake()) std::memcpy(dst, src, bytes);
  else CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}
void fill(void* dst, int value, size_t bytes) {
  if (fake()) std::memset(dst, value, bytes);
  else CUDA_OK(cudaMemset(dst, value, bytes));
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

// Runs one case on every rank; returns the wrong elements (or 1 for a failed call).
size_t runCase(std::vector<Rank>& ranks, Coll coll, ncclDataType_t type, ncclRedOp_t op, size_t count, bool inPlace) {
  const int n = static_cast<int>(ranks.size());
  const size_t es = typeSize(type), root = static_cast<size_t>(n - 1);
  const size_t inCount = coll == Coll::ReduceScatter ? count * n : count;
  const size_t outCount = coll == Coll::AllGather ? count * n : count;
  CheckPattern p(type, reduces(coll) ? op : ncclSum, n);
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
      case Coll::Reduce: wrong += countWrong(host.data(), count, p, [&](size_t i) { return p.reduced(i); }); break;
      case Coll::Broadcast:
        wrong += countWrong(host.data(), count, p, [&](size_t i) { return p.input(int(root), i); });
        break;
      case Coll::AllGather:
        wrong += countWrong(host.data(), outCount, p, [&](size_t i) { return p.input(int(i / count), i % count); });
        break;
      case Coll::ReduceScatter:
        wrong += countWrong(host.data(), count, p, [&](size_t i) { return p.reduced(r * count + i); });
        break;
    }
  }
  if (wrong)
    std::printf("WRONG %s %s %s count %zu %s: %zu elements\n", collName(coll), typeName(type), opName(op), count,
                inPlace ? "in place" : "out of place", wrong);
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2;
  const size_t maxCount = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1048583;
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
  for (Rank& k : ranks) {
    freeBuffer(k.in);
    freeBuffer(k.out);
    if (!fake()) cudaStreamDestroy(k.stream);
    ncclCommDestroy(k.comm);
  }
  std::printf("initall_check: %d ranks on one device, %zu cases, %zu failed\n", n, cases, failed);
  return failed ? 1 : 0;
}
