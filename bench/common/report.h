// The nccl-tests table, printed by rank 0: a header describing the run, one
// row per (type, op, size) with out-of-place and in-place results, and the
// average bus bandwidth at the end. Column order and units are nccl-tests'
// (time in us, algbw and busbw in GB/s = 1e9 bytes/s) so scripts that parse
// nccl-tests output parse this too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "args.h"
#include "launch.h"
#include "stats.h"

namespace gyre_bench {

void printRunHeader(const char* program, const BenchArgs& args, const RankContext& ctx,
                    const std::vector<RankIdentity>& ranks);
void printColumnHeader();

// Result of one mode (out-of-place or in-place) of one row.
struct ModeResult {
  double timeUs = 0;
  double algBw = 0;  // GB/s
  double busBw = 0;  // GB/s
  int64_t wrong = -1;  // -1 = not checked
  bool ran = true;     // false: the library has no such mode (N/A columns)
};

void printRow(size_t bytes, size_t count, ncclDataType_t type, const char* opText, int root,
              const ModeResult& outOfPlace, const ModeResult& inPlace);
// A row for a type/op the library rejected under -d all / -o all.
void printSkipped(ncclDataType_t type, const char* opText, const char* why);
// Said once, before the first row, when a mode the library rejects is left out.
void printModeSkipped(const char* modeName, const char* collName, const char* why);
void printFooter(double avgBusBw, bool checked, int64_t totalWrong);

}  // namespace gyre_bench
