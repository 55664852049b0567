#include "src/host/progress.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "src/debug/error.h"

#include "src/transport/shm/futex.h"

namespace gyre {
namespace {

constexpr size_t kMaxSleepWords = 64;
// Without futex_waitv a rank blocked on several connections sleeps on the
// first one only, so it sleeps in short slices to notice the others.
constexpr int64_t kSingleWordSliceNs = 1000000;

std::atomic<bool> gNoFutexWaitv{false};

// Whether `c` still waits, given the counter its peer moves.
bool stillBlocked(const Connection& c, uint64_t counter, bool draining) {
  if (!c.isSend) return counter <= c.step;                              // tail: no new step
  return draining ? counter != c.step : c.step - counter >= c.sendDepth;  // head: no room for the next step
}

}  // namespace

ncclResult_t progressKeepingFirst(std::initializer_list<const std::vector<Connection*>*> lists, int* culprit,
                                  int* reporter) {
  ncclResult_t first = ncclSuccess;
  std::string firstText;
  bool overwritten = false;
  for (const auto* list : lists)
    for (Connection* c : *list) {
      int who = -1;
      ncclResult_t r = c->transport->progress(*c, &who);
      if (r == ncclSuccess) continue;
      if (first != ncclSuccess) {
        overwritten = true;
        continue;
      }
      first = r;
      *culprit = who;
      if (reporter) *reporter = c->peer;
      firstText = lastErrorText();
    }
  if (overwritten) recordFailure(first, firstText.c_str());
  return first;
}

void ProgressEngine::add(Connection* conn) {
  if (conn->needsProgress) conns_.push_back(conn);
  if (conn->sharedCounters) shared_.push_back(conn);
  if (!conn->needsProgress && !conn->sharedCounters) quiet_.push_back(conn);
}

void ProgressEngine::clear() {
  conns_.clear();
  shared_.clear();
  quiet_.clear();
}

ncclResult_t ProgressEngine::progressAll(int* culprit, int* reporter) {
  ncclResult_t r = progressKeepingFirst({&conns_}, culprit, reporter);
  wakePeers();
  return r;
}

void ProgressEngine::wakePeers() {
  for (Connection* c : shared_) c->transport->wakePeer(*c);
}

ncclResult_t ProgressEngine::checkQuietPeers(int* culprit, int* reporter) {
  return progressKeepingFirst({&shared_, &quiet_}, culprit, reporter);
}

void ProgressEngine::appendPollFds(std::vector<pollfd>* fds) const {
  for (const auto* list : {&conns_, &shared_})
    for (Connection* c : *list) {
      pollfd p{};
      if (c->transport->pollRequest(*c, &p)) fds->push_back(p);
    }
}

void ProgressEngine::appendReadableReceivers(std::vector<Connection*>* out) const {
  for (const auto* list : {&conns_, &shared_})
    for (Connection* c : *list)
      if (!c->isSend) out->push_back(c);
}

void ProgressEngine::sendAbortNotices(int culprit) {
  for (Connection* c : conns_)
    if (c->isSend) c->transport->sendAbortNotice(*c, culprit);
  // Both directions: a sender blocked on this rank's buffer learns the
  // culprit too, instead of waiting for this process to exit.
  for (const auto* list : {&shared_, &quiet_})
    for (Connection* c : *list) c->transport->sendAbortNotice(*c, culprit);
}

void ProgressEngine::sleepOnShared(const std::vector<Connection*>& conns, bool draining, int timeoutMs) {
  SleepWord words[kMaxSleepWords];
  FutexWaiter waiters[kMaxSleepWords];
  size_t n = 0;
  bool ready = false;
  for (Connection* c : conns) {
    if (n == kMaxSleepWords) break;
    if (!c->transport->sleepWord(*c, &words[n])) continue;
    // Count ourselves as a sleeper before the last look at the counter; the
    // peer moves the counter before it looks for sleepers (wakePeer). So
    // either we see its step here, or it sees us and wakes us, or the futex
    // finds the word changed and returns at once: no lost wake-up.
    __atomic_fetch_add(words[n].sleepers, 1, __ATOMIC_SEQ_CST);
    uint64_t v = __atomic_load_n(words[n].counter, __ATOMIC_SEQ_CST);
    waiters[n].set(words[n].counter, static_cast<uint32_t>(v));
    ++n;
    if (!stillBlocked(*c, v, draining)) {
      ready = true;
      break;
    }
  }
  const int64_t ns = static_cast<int64_t>(timeoutMs) * 1000000;
  if (n == 0) {
    sched_yield();
  } else if (!ready) {
    if (n > 1 && !gNoFutexWaitv.load(std::memory_order_relaxed)) {
      if (!futexWaitAny(waiters, static_cast<unsigned>(n), ns)) gNoFutexWaitv.store(true);
    } else {
      futexWait(words[0].counter, static_cast<uint32_t>(waiters[0].val),
                n == 1 ? ns : std::min(ns, kSingleWordSliceNs));
    }
  }
  for (size_t i = 0; i < n; ++i) __atomic_fetch_sub(words[i].sleepers, 1, __ATOMIC_SEQ_CST);
}

}  // namespace gyre
