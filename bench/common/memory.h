// Where a benchmark's buffers live and how it times them.
//  * host (default): gyre host communicators (gyreCommInitRankHost), buffers
//    from aligned_alloc (-R 1: gyreMemAllocHost), a call returns when its result is in place, timing
//    with the steady clock.
//  * device (-G 1): the standard ncclCommInitRank on CUDA device
//    localRank % deviceCount, buffers from cudaMalloc, calls enqueued on one
//    stream, timing with CUDA events around the iterations (as nccl-tests).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "gyre.h"

namespace gyre_bench {

class BenchMemory {
 public:
  virtual ~BenchMemory() = default;
  virtual const char* kind() const = 0;  // "host" or "device"
  virtual ncclResult_t initComm(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank) = 0;
  // Zeroed buffers of at least `bytes` (nullptr when allocation fails).
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual bool upload(void* dst, const void* host, size_t bytes) = 0;
  virtual bool download(void* host, const void* src, size_t bytes) = 0;
  virtual cudaStream_t stream() const = 0;
  // Times what is issued between the two calls; stop waits for it to finish.
  virtual void startTimer() = 0;
  virtual double stopTimerUs() = 0;
  virtual bool synchronize() = 0;
  // CUDA graphs (device memory only): what is issued between begin and end
  // is captured instead of run; launchGraph runs it again.
  virtual bool beginCapture() { return false; }
  virtual bool endCapture() { return false; }
  virtual bool launchGraph() { return false; }
  // Why the last failing call failed.
  virtual std::string lastError() const = 0;
};

// `device` false: host memory, from gyreMemAllocHost when `sharedAlloc`
// (peers map it), else aligned_alloc. True: device `localRank % count`; null
// with *why set when this build or machine has no CUDA device.
std::unique_ptr<BenchMemory> makeBenchMemory(bool device, bool sharedAlloc, int localRank, std::string* why);

// Sum-AllReduce of a small host array through the communicator under test
// (staged through device memory on a device communicator).
ncclResult_t hostAllReduce(BenchMemory& memory, ncclComm_t comm, void* data, size_t count, ncclDataType_t type);

}  // namespace gyre_bench
