#include "src/device/copy/copy_exchange.h"

#include <stdio.h>

#include <algorithm>
#include <chrono>

namespace gyre {

CopyExchange::CopyExchange(int nranks, int holders)
    : nranks_(nranks),
      holders_(holders),
      nextSend_(size_t(nranks) * nranks, 0),
      nextRecv_(size_t(nranks) * nranks, 0) {}

bool CopyExchange::offer(const Offer& mine, Ticket* ticket, Offer* other, std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t pair = size_t(mine.from) * nranks_ + mine.to;
  *ticket = {mine.from, mine.to, (mine.isSend ? nextSend_ : nextRecv_)[pair]++};
  Entry& e = entries_[*ticket];
  const bool otherThere = mine.isSend ? e.hasRecv : e.hasSend;
  if (otherThere && e.abandoned) {
    *error = "the other side gave up waiting for this call earlier (its GYRE_TIMEOUT passed or it aborted)";
    entries_.erase(*ticket);
    return true;
  }
  (mine.isSend ? e.send : e.recv) = mine;
  (mine.isSend ? e.hasSend : e.hasRecv) = true;
  if (!otherThere) return false;
  e.taken = true;
  *other = mine.isSend ? e.recv : e.send;
  return true;
}

void CopyExchange::complete(const Ticket& t, EventHandle done, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[t];
    e.completed = true;
    e.done = done;
    e.error = error;
  }
  changed_.notify_all();
}

CopyExchange::Outcome CopyExchange::awaitCopy(const Ticket& t, const Deadline& deadline,
                                              const std::atomic<bool>* abort, EventHandle* done,
                                              std::string* error) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    Entry& e = entries_[t];
    if (e.completed) {
      *done = e.done;
      *error = e.error;
      entries_.erase(t);
      return error->empty() ? Outcome::kCopied : Outcome::kCopyFailed;
    }
    // Once taken, the copier only queues work and completes: wait for it
    // even past the deadline, so its copy never outlives this call.
    const bool aborted = abort && abort->load();
    if (!e.taken && (aborted || deadline.expired())) {
      e.abandoned = true;
      return aborted ? Outcome::kAborted : Outcome::kTimedOut;
    }
    // Short slices: an abort sets a flag and notifies nobody.
    changed_.wait_for(lock, std::chrono::milliseconds(std::min(20, std::max(1, deadline.remainingMs()))));
  }
}

bool CopyExchange::release() {
  if (holders_.fetch_sub(1) != 1) return false;
  delete this;
  return true;
}

std::string CopyExchange::mismatch(const Offer& mine, const Offer& other) {
  const Offer& send = mine.isSend ? mine : other;
  const Offer& recv = mine.isSend ? other : mine;
  char text[256];
  if (mine.captured != other.captured) {
    snprintf(text, sizeof(text), "this %s is %scaptured into a CUDA graph but rank %d's matching call is%s; both sides "
             "of a pair must capture alike", mine.isSend ? "ncclSend" : "ncclRecv", mine.captured ? "" : "not ",
             mine.isSend ? mine.to : mine.from, mine.captured ? " not" : "");
    return text;
  }
  if (send.bytes == recv.bytes) return "";
  snprintf(text, sizeof(text), "mismatched sizes: rank %d's ncclSend has %zu bytes but rank %d's ncclRecv %zu",
           send.from, send.bytes, recv.to, recv.bytes);
  return text;
}

}  // namespace gyre
