// Receiving from any source (torch's recv() without src) on top of gyre,
// whose sends and receives pair up per pair of ranks in issue order and
// which has no probe.
//
// Every torch-level send announces itself in the group's store by counting
// up "sent from me to dst". A receive from any source waits until some peer
// has announced more sends to this rank than this rank has posted receives
// from it; the earliest unmatched send from that peer is then what a plain
// receive from it gets. The counts see every torch-level send and receive
// of the group, so a receive with a source and one without never claim the
// same message.
//
// The cost: one store round trip per send (to the store's server, rank 0's
// process), paid on the thread that calls send.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace torch_gyre {

class SendLedger {
 public:
  SendLedger(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout);

  // A send from this rank to `dst` was issued (before it can be matched).
  void announceSend(int dst);
  // A receive from `src` was posted (the group's worker, in issue order).
  void noteReceive(int src);
  // The rank whose earliest unmatched send to this rank a receive now gets,
  // or a TORCH_CHECK error after the group's timeout. Peers are tried in
  // turn from the one after the last answer, so no sender is starved.
  int waitForSender();
  // Makes a waitForSender in progress, and every later one, fail at once.
  void cancel() { cancelled_.store(true, std::memory_order_release); }

 private:
  int64_t announced(int src);

  c10::intrusive_ptr<c10d::Store> store_;
  std::mutex storeMu_;  // one store request at a time from this group
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::vector<int64_t> received_;  // per source: receives posted (worker thread only)
  int next_ = 0;
  std::atomic<bool> cancelled_{false};
};

}  // namespace torch_gyre
