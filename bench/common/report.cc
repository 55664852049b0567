#include "report.h"

#include <cstdio>
#include <string>

#include "datatypes.h"

namespace gyre_bench {
namespace {

// nccl-tests' precision steps, so that its parsers read the same digits.
std::string formatTime(double us) {
  char buf[32];
  if (us >= 10000.0)
    std::snprintf(buf, sizeof buf, "%.0f", us);
  else if (us >= 100.0)
    std::snprintf(buf, sizeof buf, "%.1f", us);
  else
    std::snprintf(buf, sizeof buf, "%.2f", us);
  return buf;
}

void printMode(const ModeResult& m) {
  if (!m.ran) {
    std::printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  std::string wrong = m.wrong < 0 ? "N/A" : std::to_string(m.wrong);
  std::printf("  %7s  %6.2f  %6.2f  %6s", formatTime(m.timeUs).c_str(), m.algBw, m.busBw,
              wrong.c_str());
}

}  // namespace

void printRunHeader(const char* program, const BenchArgs& args, const RankContext& ctx,
                    const std::vector<RankIdentity>& ranks) {
  int version = 0;
  ncclGetVersion(&version);
  std::printf("# Collective test starting: %s\n", program);
  std::printf("# gyre %d.%d.%d, NCCL API version %d\n", GYRE_MAJOR, GYRE_MINOR, GYRE_PATCH,
              version);
  std::printf("# nRanks %d launcher %s minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
              "iters: %d validation: %d average: %d memory: %s cudagraph: %d\n",
              ctx.nranks, ctx.launcher, args.minBytes, args.maxBytes,
              args.stepFactor > 1 ? args.stepFactor : args.stepBytes,
              args.stepFactor > 1 ? "factor" : "bytes", args.warmupIters, args.iters,
              args.check ? 1 : 0, args.average, args.device ? "device" : "host", args.graphLaunches);
  std::printf("#\n# Using %s memory\n", args.device ? "device" : "host");
  for (size_t i = 0; i < ranks.size(); ++i)
    std::printf("#  Rank %2zu Pid %6d on %10s %s\n", i, ranks[i].pid, ranks[i].host.c_str(),
                args.device ? "device memory (CUDA device localRank % count)" : "host memory");
  std::printf("#\n");
}

void printColumnHeader() {
  // Mode titles centred over their 33-character column groups.
  std::printf("# %10s  %12s  %8s  %6s  %6s  %-10s%-12s%11s  %-12s%-8s%13s\n", "", "", "", "", "",
              "", "out-of-place", "", "", "in-place", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int i = 0; i < 2; ++i)
    std::printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
  std::printf("\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int i = 0; i < 2; ++i) std::printf("  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
  std::printf("\n");
  std::fflush(stdout);
}

void printRow(size_t bytes, size_t count, ncclDataType_t type, const char* opText, int root,
              const ModeResult& outOfPlace, const ModeResult& inPlace) {
  std::printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, typeName(type), opText, root);
  printMode(outOfPlace);
  printMode(inPlace);
  std::printf("\n");
  // Rows appear as they finish, also when stdout is a pipe (compare scripts).
  std::fflush(stdout);
}

void printSkipped(ncclDataType_t type, const char* opText, const char* why) {
  std::printf("# skipping type %s op %s: %s\n", typeName(type), opText, why);
  std::fflush(stdout);
}

void printModeSkipped(const char* modeName, const char* collName, const char* why) {
  std::printf("# %s %s not run: %s\n", modeName, collName, why);
  std::fflush(stdout);
}

void printFooter(double avgBusBw, bool checked, int64_t totalWrong) {
  if (checked)
    std::printf("# Wrong elements       : %lld %s\n", static_cast<long long>(totalWrong),
                totalWrong ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n#\n", avgBusBw);
  std::fflush(stdout);
}

}  // namespace gyre_bench
