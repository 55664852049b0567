// Recording failures: the first place that knows the facts calls fail(), which
// keeps the text for ncclGetLastError and logs it at WARN. Callers above just
// propagate the ncclResult_t.
#pragma once

#include <string>

#include "include/gyre.h"

namespace gyre {

// Records a formatted message as the last error and returns `code`.
ncclResult_t fail(ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// The last recorded error text for this thread, else for the process ("" if none).
const char* lastErrorText();

// Records `text` as the last error without logging it again: a failure that
// was held and is raised later, once other reports may have overwritten it.
ncclResult_t recordFailure(ncclResult_t code, const char* text);

// Records `text` as this thread's last error only: no lock, no log line, no
// allocation (what a forked child may still do; see fork_guard.h).
ncclResult_t recordThreadFailure(ncclResult_t code, const char* text);

// This thread's last error text ("" if none), taking no lock.
const char* threadErrorText();

// While one is alive (and `on`), fail() on this thread records its text but
// does not log it. The executor holds a transport's failure and keeps polling
// the same connections, which report it again on every pass.
class QuietFailures {
 public:
  explicit QuietFailures(bool on);
  ~QuietFailures();
  QuietFailures(const QuietFailures&) = delete;
  QuietFailures& operator=(const QuietFailures&) = delete;

 private:
  bool on_;  // touches no thread-local state when off: it sits on the polling path
  bool wasQuiet_ = false;
};

// While one is alive, fail() on this thread reports the outcome of an attempt
// that may fail as a matter of course (a short accept slice while hellos are
// pending, a probe of a peer's listener, a non-blocking read): the text is
// neither logged nor seen by ncclGetLastError on other threads, and when the
// scope ends the thread's earlier text comes back. keep() makes the failure
// an error after all: it is then recorded and logged as fail() would have.
// Scopes nest; only the outermost one records what was kept.
class TentativeFailures {
 public:
  TentativeFailures();
  ~TentativeFailures();
  TentativeFailures(const TentativeFailures&) = delete;
  TentativeFailures& operator=(const TentativeFailures&) = delete;
  void keep() { kept_ = true; }

 private:
  std::string saved_;
  bool kept_ = false;
};

// Forgets this thread's last error (used at the start of API calls that succeed
// after an earlier failure, so stale text is not mistaken for a new error).
void clearThreadError();

}  // namespace gyre

#define GYRE_CHECK(call)                          \
  do {                                            \
    ncclResult_t gyre_res_ = (call);              \
    if (gyre_res_ != ncclSuccess) return gyre_res_; \
  } while (0)
