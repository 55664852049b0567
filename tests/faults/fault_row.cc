#include "fault_row.h"

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace gyre::test {

int countSockets() {
  int n = 0;
  for (const auto& [fd, target] : listOpenFds()) n += target.find("socket:") != std::string::npos ? 1 : 0;
  return n;
}

Baseline takeBaseline() {
  Baseline b;
  b.fdList = listOpenFds();
  b.fds = countOpenFds();
  b.threads = countThreads();
  b.sockets = countSockets();
  return b;
}

const char* resultName(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    case ncclTimeout: return "ncclTimeout";
    default: return "ncclResult?";
  }
}

void recordOutcome(ncclResult_t r, const std::string& error) {
  // Enough of the message to show who and what it names; the rest is in
  // the test's log. Head and tail: a cause is often appended at the end.
  std::string text = error.size() > 180 ? error.substr(0, 100) + " ... " + error.substr(error.size() - 75) : error;
  std::replace(text.begin(), text.end(), '|', '/');
  rankRecord("saw", r == ncclSuccess ? "ok" : std::string(resultName(r)) + " \"" + text + "\"");
  rankRecord("t_err", std::to_string(monotonicSeconds()));
}

void recordFaultTime() { rankRecord("t_fault", std::to_string(monotonicSeconds())); }

std::string recordLeftovers(const Baseline& b, double settle_s) {
  const std::string left = waitForBaseline(b.fds, b.threads, b.fdList, settle_s);
  const int fds = countOpenFds() - b.fds, threads = countThreads() - b.threads,
            sockets = countSockets() - b.sockets;
  rankRecord("left", std::to_string(fds) + " fds (" + std::to_string(sockets) + " sockets), " +
                         std::to_string(threads) + " threads");
  return left;
}

std::string verbsLeft(long* mrs, long* qps, long* contexts) {
  *mrs = *qps = *contexts = 0;
  const char* path = getenv("GYRE_IBVERBS_LIB");
  void* lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  if (!lib) return "";
  auto fn = reinterpret_cast<void (*)(long*, long*, long*, long*, long*, long*)>(dlsym(lib, "fakeverbs_counts"));
  auto openContexts = reinterpret_cast<long (*)()>(dlsym(lib, "fakeverbs_open_contexts"));
  long cqs = 0, pds = 0, regs = 0, sends = 0;
  if (fn) fn(mrs, qps, &cqs, &pds, &regs, &sends);
  if (openContexts) *contexts = openContexts();
  dlclose(lib);
  return ", " + std::to_string(*mrs) + " MRs, " + std::to_string(*qps) + " QPs";
}

int gyreShmSegments() {
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) n += strstr(e->d_name, "gyre") ? 1 : 0;
    closedir(d);
  }
  return n;
}

namespace {

std::string recordOf(const RankOutcome& r, const std::string& key) {
  auto it = r.records.find(key);
  return it == r.records.end() ? "" : it->second;
}

}  // namespace

void printRow(const std::string& name, const RunResult& result, int shmBefore, double faultTime) {
  if (faultTime == 0)
    for (const RankOutcome& r : result.ranks)
      if (!recordOf(r, "t_fault").empty()) faultTime = std::stod(recordOf(r, "t_fault"));
  std::ostringstream saw, left;
  double worst = -1;
  bool allClean = true;
  for (const RankOutcome& r : result.ranks) {
    saw << (r.rank ? "; " : "") << "r" << r.rank << ": ";
    if (r.killedAsPlanned || (r.signal && recordOf(r, "saw").empty())) {
      saw << "(victim, signal " << r.signal << ")";
      continue;
    }
    if (r.timedOut) {
      saw << "HUNG (killed at the harness deadline)";
      allClean = false;
      continue;
    }
    const std::string s = recordOf(r, "saw");
    saw << (s.empty() ? "exit " + std::to_string(r.exitCode) : s);
    if (!r.failures.empty()) saw << " [check failed]";
    const std::string t = recordOf(r, "t_err");
    if (!t.empty() && faultTime > 0 && s.rfind("ok", 0) != 0) worst = std::max(worst, std::stod(t) - faultTime);
    const std::string l = recordOf(r, "left");
    if (!l.empty() && l.rfind("0 fds (0 sockets), 0 threads", 0) != 0) {
      left << "r" << r.rank << ": " << l << "; ";
      allClean = false;
    }
  }
  const int shm = gyreShmSegments() - shmBefore;
  if (shm != 0) left << shm << " /dev/shm segments; ";
  std::string leftText = left.str();
  if (allClean && shm == 0) leftText = "none (fds, sockets, threads per rank; /dev/shm)";
  char time[32] = "-";
  if (worst >= 0) snprintf(time, sizeof time, "%.2f s", worst);
  printf("MATRIX|%s|%s|%s|%s|%s\n", name.c_str(), saw.str().c_str(), time, leftText.c_str(),
         result.allOk() ? "pass" : "FAIL");
  fflush(stdout);
}

}  // namespace gyre::test
