// fork_ranks.h — runs one forked child process per rank and reports how each ended.
//
// A multi-process test calls runRanks() from a Catch2 TEST_CASE. runRanks forks a
// launcher process, which forks one child per rank and then (in IdMode::kParent)
// calls ncclGetUniqueId and sends the id to each rank over a socket, so the process
// that made the id keeps the rendezvous alive, as in a program that forks its
// workers. The order matters: ncclGetUniqueId starts a thread, and a process must
// not fork while it has live threads (gyre refuses calls in such a child).
// The Catch2 process itself never calls into gyre, so each test starts from a fresh
// library state (gyre snapshots its environment at first use) and sees exactly the
// variables it sets.
//
// Each child runs the rank function and _exit()s with its return value; Catch2 is
// never used in a child (an assertion there would be invisible to the parent).
// Instead a child reports through a pipe: rankFail() sends a failure line,
// rankRecord() a key/value pair that the parent compares across ranks (for example
// a hash of each rank's result), rankProgress() what it is doing (shown if it then
// crashes or hangs). The launcher waits with a deadline, SIGKILLs every child still
// running when it passes, and sends back which ranks failed, crashed or timed out.
#ifndef GYRE_TESTS_SUPPORT_FORK_RANKS_H_
#define GYRE_TESTS_SUPPORT_FORK_RANKS_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gyre.h"

namespace gyre::test {

// Where the ranks' unique id comes from.
enum class IdMode {
  // The launcher calls ncclGetUniqueId once the ranks are forked (its rendezvous
  // thread lives in the launcher) and sends every child the id. NCCL_COMM_ID is unset.
  kParent,
  // The harness picks a free loopback port and sets NCCL_COMM_ID=127.0.0.1:PORT in
  // every child; each child calls ncclGetUniqueId itself and rank 0's init hosts
  // the rendezvous.
  kEnvCommId,
  // No id is made; the rank function gets an all-zero id and makes its own.
  kNone,
};

struct RunContext {
  int nranks = 0;
  std::vector<pid_t> pids;  // by rank
  int commIdPort = 0;       // the NCCL_COMM_ID port in kEnvCommId mode, else 0
  const std::atomic<bool>* finished = nullptr;  // becomes true once every child is reaped
};

struct RankOptions {
  double timeout_s = 30;  // for the whole run; every child still running then is SIGKILLed
  IdMode idMode = IdMode::kParent;
  int idCount = 1;  // kParent: how many ids the launcher makes (rankIds() in a child)
  // Variables set in the launcher and so in every child; std::nullopt unsets one.
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  // Variables set in one child only, before it makes its id. gyre reads its
  // environment once per process, so these take effect only where the child
  // is the first to call gyre: IdMode::kEnvCommId or kNone.
  std::function<std::vector<std::pair<std::string, std::optional<std::string>>>(int rank)> rankEnv;
  // Kill one rank mid-run: SIGKILL rank `killRank` `killDelay_s` after it calls
  // rankMark(). Its death by SIGKILL then counts as expected, not as a failure.
  int killRank = -1;
  double killDelay_s = 0.05;
  // Runs on a launcher thread once every child is forked, while the ranks run. It
  // must bound its own waits (RunContext::finished says when the ranks are done).
  // It runs in the launcher's copy of memory: report back with taskRecord().
  std::function<void(const RunContext&)> parentTask;
};

struct RankOutcome {
  int rank = 0;
  pid_t pid = -1;
  bool exited = false;  // exited normally, exitCode is valid
  int exitCode = -1;
  int signal = 0;                 // signal that ended it, 0 if it exited
  bool timedOut = false;          // still running at the deadline; SIGKILLed by the harness
  bool killedAsPlanned = false;   // the RankOptions::killRank victim, SIGKILLed after its mark
  double endTime_s = 0;           // seconds from the start of the run to when it was reaped
  std::vector<std::string> failures;           // from rankFail()
  std::map<std::string, std::string> records;  // from rankRecord()
  std::string progress;                        // the last rankProgress()
  bool ok() const;  // exit code 0 and no failures, or killedAsPlanned
  std::string describe() const;
};

struct RunResult {
  std::string setupError;  // the harness itself could not start the ranks
  std::vector<RankOutcome> ranks;
  double elapsed_s = 0;
  int commIdPort = 0;
  std::map<std::string, std::string> taskRecords;  // from taskRecord() in parentTask
  bool allOk() const;
  // One line per rank that is not ok, with its messages; "all N ranks ok" otherwise.
  std::string describe() const;
  // Keys whose value differs between the ranks that recorded them ("" if none).
  std::string recordMismatches() const;
};

using RankFn = std::function<int(int rank, int nranks, const ncclUniqueId& id)>;

RunResult runRanks(int nranks, const RankFn& fn, const RankOptions& options = {});

// ---- Child side: call only from inside a rank function ---------------------------

// Sends a failure line to the parent (the first 3000 bytes of it).
void rankFail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Sends a key/value pair to the parent; keys are per rank, a later value wins.
void rankRecord(const std::string& key, const std::string& value);
// Records each line of `text` (a plugin's or a recorder's log) under keys
// line0000, line0001, ... and their number under "lines".
void rankRecordLines(const std::string& text);
// The lines a rank recorded with rankRecordLines (parent side).
std::vector<std::string> recordedLines(const RankOutcome& r);
// Says what the rank is doing now; shown for a rank that then crashes or hangs.
void rankProgress(const std::string& what);
// Tells the parent "now": starts the kill countdown if this is the kill victim.
void rankMark();
// The ids made by the launcher (IdMode::kParent, RankOptions::idCount of them).
const std::vector<ncclUniqueId>& rankIds();
// Number of failures this child has reported so far.
int rankFailureCount();
// From RankOptions::parentTask: a key/value pair for RunResult::taskRecords.
void taskRecord(const std::string& key, const std::string& value);

// Fails the rank (reports file:line, the condition and the message) and returns 1
// from the rank function when `cond` is false.
#define RANK_CHECK(cond, ...)                                                 \
  do {                                                                        \
    if (!(cond)) {                                                            \
      ::gyre::test::rankFailAt(__FILE__, __LINE__, #cond, __VA_ARGS__);       \
      return 1;                                                               \
    }                                                                         \
  } while (0)
void rankFailAt(const char* file, int line, const char* cond, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// ---- Small helpers shared by the tests ------------------------------------------

double monotonicSeconds();
// A TCP port on 127.0.0.1 that was free a moment ago.
int pickFreePort();
// Entries in /proc/self/fd and /proc/self/task.
int countOpenFds();
int countThreads();
// "fd 7 -> socket:[123]" for each open fd, to explain a leak.
std::map<int, std::string> listOpenFds();
// Polls up to `settle_s` for the fd and thread counts to come back to the given
// values; returns "" if they do, else a description of what is left over.
std::string waitForBaseline(int fds, int threads, const std::map<int, std::string>& fdsBefore,
                            double settle_s = 1.0);
// True if `text` contains `word` with no letter, digit or '_' right before or after.
bool containsWord(const std::string& text, const std::string& word);
// Case-insensitive substring search.
bool containsNoCase(const std::string& text, const std::string& needle);
// ncclGetLastError(NULL) as a std::string ("" for NULL).
std::string lastError();

}  // namespace gyre::test

#endif  // GYRE_TESTS_SUPPORT_FORK_RANKS_H_
