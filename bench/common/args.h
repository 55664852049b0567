// Command line of the *_perf benchmarks: nccl-tests' flags and defaults, plus
// -p N to fork N local ranks (gyre runs on host memory without MPI).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gyre.h"

namespace gyre_bench {

struct BenchArgs {
  size_t minBytes = 32 << 20;   // -b
  size_t maxBytes = 32 << 20;   // -e
  size_t stepBytes = 1 << 20;   // -i, used when stepFactor is 1
  size_t stepFactor = 1;        // -f
  int iters = 20;               // -n
  int warmupIters = 5;          // -w
  bool check = true;            // -c
  std::vector<ncclDataType_t> types{ncclFloat32};  // -d
  std::vector<ncclRedOp_t> ops{ncclSum};           // -o
  bool allTypes = false;        // -d all: skip types the library rejects
  bool allOps = false;          // -o all: skip ops the library rejects
  int root = 0;                 // -r
  int average = 1;              // -a: 0 rank 0's time, 1 mean, 2 min, 3 max
  int forkRanks = 0;            // -p
  int timeoutSeconds = 600;     // -T, fork mode only; 0 = none
  bool device = false;          // -G 1: device memory and ncclCommInitRank (nccl-tests' setting)
  bool sharedAlloc = false;     // -R 1: host buffers from gyreMemAllocHost (peers can map them)
  int graphLaunches = 0;        // -C n: time the iterations captured in a CUDA graph, launched n times
};

// Which flags a collective understands (-o and -r are meaningless for some).
struct ArgsSpec {
  const char* program;
  bool usesOp;
  bool usesRoot;
};

// Parses argv into *args. Returns -1 to go on, or the exit code to stop with
// (0 after --help, 2 after a usage error, which has been printed).
int parseArgs(int argc, char** argv, const ArgsSpec& spec, BenchArgs* args);

// The message sizes to run, in bytes, before rounding down to whole elements.
std::vector<size_t> messageSizes(const BenchArgs& args);

// "64M" -> 67108864. Suffixes K, M, G, T are powers of 1024 (either case).
bool parseSize(const std::string& text, size_t* bytes);

}  // namespace gyre_bench
