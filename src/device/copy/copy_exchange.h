// Where the ranks of one communicator that live in one process pair their
// sends and receives (src/device/copy/copy_calls.h). The k-th send from rank
// s to rank r meets the k-th receive at r from s, as NCCL matches
// point-to-point calls. Whichever side arrives second finds the first's
// offer and copies (it then knows both buffers, and the first side's `ready`
// event is already recorded, so its stream may wait on it); the first side
// blocks until the copy is queued and then waits for its `done` event. A
// CUDA stream may only wait on an event recorded earlier, never on a value
// some other stream writes later (such a wait holds a hardware queue that
// the writer may need), which is why the first side waits on the host.
//
// Offering never blocks, so one thread that drives several ranks in a group
// offers all their calls before it waits for any.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "src/kernels/pair_copy_work.h"
#include "src/debug/deadline.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

class CopyExchange {
 public:
  // One side of a send/recv pair: its buffer, and where its stream stood
  // when it made the call (its buffer may be read or written from there on).
  struct Offer {
    int from = 0, to = 0;  // the sending and the receiving rank
    bool isSend = false;
    void* buffer = nullptr;
    size_t bytes = 0;
    EventHandle ready = nullptr;  // eager calls
    // Calls captured into a graph (captured_copies.h): their flags.
    bool captured = false;
    PairFlags* flags = nullptr;
  };
  // Names one exchange: the pair and its sequence number.
  struct Ticket {
    int from = 0, to = 0;
    uint64_t seq = 0;
    bool operator<(const Ticket& o) const { return std::tie(from, to, seq) < std::tie(o.from, o.to, o.seq); }
  };

  // Made by one rank for `holders` ranks of this process (each calls
  // release() once) of a communicator of `nranks`.
  CopyExchange(int nranks, int holders);

  // Posts `mine` as the next send (or receive) of its pair. True when the
  // other side was there first: *other is its offer and the caller copies,
  // then calls complete(). False: the caller waits in awaitCopy().
  // *error is set (and true returned) when the other side gave up on it.
  bool offer(const Offer& mine, Ticket* ticket, Offer* other, std::string* error);

  // The copier's report: the copy is queued and `done` recorded after it
  // (the waiter takes the event over), or why it is not (`error`).
  void complete(const Ticket& t, EventHandle done, const std::string& error);

  // How a wait in awaitCopy ended.
  enum class Outcome {
    kCopied,      // *done is the event to wait on (the caller destroys it)
    kCopyFailed,  // the copier said why in *error
    kTimedOut,    // `deadline` passed first; the offer is withdrawn (a late
                  // peer fails rather than pairing with the next call)
    kAborted,     // `abort` was set first; withdrawn likewise
  };
  // Waits until the other side took the offer and completed.
  Outcome awaitCopy(const Ticket& t, const Deadline& deadline, const std::atomic<bool>* abort, EventHandle* done,
                    std::string* error);

  // Why the pair of `mine` and `other` cannot be copied, "" when it can:
  // sizes that differ, or one side captured into a CUDA graph and not the other.
  static std::string mismatch(const Offer& mine, const Offer& other);

  // Drops one holder's reference; true for the last, who deletes it.
  bool release();

 private:
  struct Entry {
    bool hasSend = false, hasRecv = false;
    Offer send, recv;
    bool taken = false, completed = false, abandoned = false;
    EventHandle done = nullptr;
    std::string error;
  };

  const int nranks_;
  std::atomic<int> holders_;
  std::mutex mutex_;
  std::condition_variable changed_;
  // The next sequence number of each pair's sends and receives, [from * n + to].
  std::vector<uint64_t> nextSend_, nextRecv_;
  std::map<Ticket, Entry> entries_;  // offered and not yet collected by the waiter
};

}  // namespace gyre
