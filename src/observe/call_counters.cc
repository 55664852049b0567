#include "src/observe/call_counters.h"

#include <cstdio>

#include "src/observe/clock.h"

namespace gyre {

const char* apiFuncName(ApiFunc f) {
  switch (f) {
    case ApiFunc::AllReduce: return "ncclAllReduce";
    case ApiFunc::Broadcast: return "ncclBroadcast";
    case ApiFunc::Reduce: return "ncclReduce";
    case ApiFunc::AllGather: return "ncclAllGather";
    case ApiFunc::ReduceScatter: return "ncclReduceScatter";
    case ApiFunc::Send: return "ncclSend";
    case ApiFunc::Recv: return "ncclRecv";
    case ApiFunc::Count: break;
  }
  return "?";
}

const char* execPathName(ExecPath p) {
  switch (p) {
    case ExecPath::Ring: return "Ring";
    case ExecPath::Tree: return "Tree";
    case ExecPath::Direct: return "Direct";
    case ExecPath::Doubling: return "Doubling";
    case ExecPath::SingleCopy: return "SingleCopy";
    case ExecPath::PointToPoint: return "PointToPoint";
    case ExecPath::Count: break;
  }
  return "?";
}

CounterSnapshot snapshotOf(const CommCounters& c) {
  CounterSnapshot s;
  const double perTick = secondsPerTick();
  for (int f = 0; f < kApiFuncs; ++f) {
    const CallCounters& from = c.api[f];
    CounterSnapshot::Func& to = s.api[f];
    to.calls = from.calls.get();
    to.bytes = from.bytes.get();
    to.groupedCalls = from.groupedCalls.get();
    to.seconds = static_cast<double>(from.ticks.get()) * perTick;
    for (int p = 0; p < kExecPaths; ++p) {
      to.pathCalls[p] = from.pathCalls[p].get();
      to.pathBytes[p] = from.pathBytes[p].get();
    }
  }
  s.groups = c.groups.get();
  s.groupSeconds = static_cast<double>(c.groupTicks.get()) * perTick;
  return s;
}

namespace {

std::string bytesText(uint64_t b) {
  char buf[32];
  if (b < 10 * 1024) snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  else if (b < 10ull << 20) snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else if (b < 10ull << 30) snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else snprintf(buf, sizeof buf, "%.1f GiB", b / 1073741824.0);
  return buf;
}

std::string secondsText(double s) {
  char buf[32];
  if (s < 1e-3) snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else if (s < 1) snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

}  // namespace

std::vector<std::string> describeCounters(const CounterSnapshot& s) {
  std::vector<std::string> lines;
  for (int f = 0; f < kApiFuncs; ++f) {
    const CounterSnapshot::Func& c = s.api[f];
    if (c.calls == 0) continue;
    std::string line = std::string(apiFuncName(static_cast<ApiFunc>(f))) + ": " + std::to_string(c.calls) +
                       " calls, " + bytesText(c.bytes) + ", " + secondsText(c.seconds);
    if (c.groupedCalls) line += " (" + std::to_string(c.groupedCalls) + " calls in groups, timed with them)";
    std::string paths;
    for (int p = 0; p < kExecPaths; ++p) {
      if (!c.pathCalls[p]) continue;
      if (!paths.empty()) paths += ", ";
      paths += std::string(execPathName(static_cast<ExecPath>(p))) + " " + std::to_string(c.pathCalls[p]) +
               " calls " + bytesText(c.pathBytes[p]);
    }
    if (!paths.empty()) line += "; ran as " + paths;
    lines.push_back(line);
  }
  if (s.groups)
    lines.push_back("groups: " + std::to_string(s.groups) + " ncclGroupEnd, " + secondsText(s.groupSeconds));
  return lines;
}

}  // namespace gyre
