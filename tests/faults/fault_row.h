// fault_row.h — what one fault case measures, and the row it adds to the
// fault matrix (scripts/fault-matrix).
//
// Inside a rank (a forked child): takeBaseline() before init, then
// recordOutcome() with what the failing call returned and when, then
// recordLeftovers() after ncclCommDestroy/ncclCommAbort, which counts from
// /proc/self what the communicator left: fds, sockets among them, threads.
// In the test process: printRow() turns the ranks' records into one line
//   MATRIX|case|what every rank saw|time to the error|resources left
// on stdout, which scripts/fault-matrix collects into its table. The line is
// printed whether the case passes or not; the Catch2 checks decide that.
#pragma once

#include <map>
#include <string>

#include "../support/fork_ranks.h"

namespace gyre::test {

struct Baseline {
  int fds = 0;
  int threads = 0;
  int sockets = 0;
  std::map<int, std::string> fdList;
};

Baseline takeBaseline();
int countSockets();  // fds in /proc/self/fd that are sockets

// Records "saw" (result name and the error text, shortened) and "t_err" (the
// monotonic time the call returned; CLOCK_MONOTONIC is one clock for every
// process, so the parent can subtract the fault's time).
void recordOutcome(ncclResult_t r, const std::string& error);
// Records "t_fault": now, as the moment of the fault this rank causes.
void recordFaultTime();
// Waits up to `settle_s` for the fd and thread counts to return to `b`,
// records "left" ("0 fds, 0 sockets, 0 threads" or what remains) and returns
// "" when nothing is left, else the description.
std::string recordLeftovers(const Baseline& b, double settle_s = 2.0);

// Entries of /dev/shm whose name has "gyre" in it (gyre's shared memory is
// memfd-backed, so this must stay 0; counted to prove it).
int gyreShmSegments();

// The row for `name` from the ranks' records. `faultTime` (monotonic
// seconds, 0 if unknown) is subtracted from each survivor's t_err; when 0 the
// victim's t_fault record is used. `shmBefore` is gyreShmSegments() before.
void printRow(const std::string& name, const RunResult& result, int shmBefore, double faultTime = 0);

// The fake verbs provider's live MRs, QPs and open device contexts in this
// process (tests/net/fake_verbs.cc, the library GYRE_IBVERBS_LIB names);
// returns ", N MRs, M QPs", or "" (all 0) when the provider is not loaded.
// gyre keeps the device contexts open for the process, as NCCL does, each
// holding one descriptor: they are not a communicator's leftovers.
std::string verbsLeft(long* mrs, long* qps, long* contexts);

// The text of an ncclResult_t enum value ("ncclRemoteError").
const char* resultName(ncclResult_t r);

}  // namespace gyre::test
