// A child forked from a process in which gyre is busy (a live communicator, the
// process-wide watcher threads) may not use gyre: POSIX allows such a child only
// async-signal-safe calls, and the parent's communicators are not its own. Every
// call there returns ncclInvalidUsage and ncclGetLastError names the fork.
//
// Each case runs in a rank of its own (so the Catch2 process never has gyre
// threads) and forks a probe from there. The probe itself is careful: it makes
// only gyre calls and write(), fills a fixed buffer and ends with _exit.
#include <catch2/catch.hpp>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "../support/fork_ranks.h"

using namespace gyre::test;

namespace {

// What the probe saw: one result code per call and ncclGetLastError's text.
struct ProbeReport {
  int codes[8];
  int ncodes;
  char lastError[1024];
};

// Forks a probe that runs `calls` (which fills `report->codes`) and sends the
// report back through a pipe. Returns "" or why no report came within 20 s.
template <typename Calls>
std::string runProbe(Calls calls, ProbeReport* report) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    ProbeReport r;
    memset(&r, 0, sizeof r);
    calls(&r);
    const char* text = ncclGetLastError(nullptr);
    size_t n = 0;
    for (; text && text[n] && n + 1 < sizeof r.lastError; ++n) r.lastError[n] = text[n];
    r.lastError[n] = '\0';
    ssize_t sent = write(fds[1], &r, sizeof r);
    _exit(sent == static_cast<ssize_t>(sizeof r) ? 0 : 1);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return "fork failed";
  }
  size_t got = 0;
  const double deadline = monotonicSeconds() + 20;
  while (got < sizeof *report && monotonicSeconds() < deadline) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = read(fds[0], reinterpret_cast<char*>(report) + got, sizeof *report - got);
    if (n <= 0) break;
    got += size_t(n);
  }
  close(fds[0]);
  if (got < sizeof *report) kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return got == sizeof *report ? "" : "the probe sent no report within 20 s (it hung or crashed)";
}

RankOptions oneRank() {
  RankOptions o;
  o.idMode = IdMode::kNone;
  o.timeout_s = 60;
  return o;
}

// Checks that every code is ncclInvalidUsage and that the text names the fork
// and the parent's pid.
int checkRefused(const ProbeReport& r, int expectedCalls) {
  RANK_CHECK(r.ncodes == expectedCalls, "the probe made %d calls, expected %d", r.ncodes, expectedCalls);
  for (int i = 0; i < r.ncodes; ++i)
    RANK_CHECK(r.codes[i] == ncclInvalidUsage, "call %d in the forked child returned %d, not ncclInvalidUsage", i,
               r.codes[i]);
  const std::string text = r.lastError;
  RANK_CHECK(text.find("forked") != std::string::npos, "the last error does not name the fork: %s", text.c_str());
  RANK_CHECK(containsWord(text, std::to_string(getpid())), "the last error does not name the parent %d: %s",
             int(getpid()), text.c_str());
  return 0;
}

}  // namespace

TEST_CASE("a child forked after ncclGetUniqueId uses gyre as under NCCL: the id's rendezvous thread is no hazard",
          "[multiproc][fork]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclUniqueId id;
        RANK_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId: %s", lastError().c_str());
        ProbeReport report;
        const std::string why = runProbe(
            [](ProbeReport* r) {
              ncclUniqueId mine;
              void* mem = nullptr;
              r->codes[r->ncodes++] = ncclGetUniqueId(&mine);
              r->codes[r->ncodes++] = gyreMemAllocHost(&mem, 64);
              r->codes[r->ncodes++] = mem ? gyreMemFreeHost(mem) : ncclSystemError;
            },
            &report);
        RANK_CHECK(why.empty(), "%s", why.c_str());
        RANK_CHECK(report.ncodes == 3, "the probe made %d calls, expected 3", report.ncodes);
        for (int i = 0; i < report.ncodes; ++i)
          RANK_CHECK(report.codes[i] == ncclSuccess, "call %d in the child returned %d: %s", i, report.codes[i],
                     report.lastError);
        return 0;
      },
      oneRank());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a child forked from a process with a live host communicator cannot use it, and the parent's still works",
          "[multiproc][fork]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclUniqueId id;
        RANK_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId: %s", lastError().c_str());
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&comm, 1, id, 0, nullptr) == ncclSuccess, "init: %s", lastError().c_str());
        ProbeReport report;
        const std::string why = runProbe(
            [comm](ProbeReport* r) {
              double x = 3, y = 0;
              int count = 0;
              r->codes[r->ncodes++] = ncclAllReduce(&x, &y, 1, ncclFloat64, ncclSum, comm, nullptr);
              r->codes[r->ncodes++] = ncclCommCount(comm, &count);
              r->codes[r->ncodes++] = ncclCommDestroy(comm);
            },
            &report);
        RANK_CHECK(why.empty(), "%s", why.c_str());
        if (checkRefused(report, 3) != 0) return 1;
        double x = 5, y = 0;
        RANK_CHECK(ncclAllReduce(&x, &y, 1, ncclFloat64, ncclSum, comm, nullptr) == ncclSuccess,
                   "the parent's AllReduce after the child's attempts: %s", lastError().c_str());
        RANK_CHECK(y == 5, "the parent's one-rank AllReduce of 5 gave %g", y);
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      oneRank());
  INFO(result.describe());
  CHECK(result.allOk());
}
