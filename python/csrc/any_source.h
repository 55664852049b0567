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
// The announcements go out from a thread of their own, which adds up the
// sends made while it waits for the store, so a send never waits for the
// store (a round trip to its server in rank 0's process: 50-100 us on a VM).
// A receive from any source may see a message's announcement after the
// data is there; it only waits until then.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace torch_gyre {

class SendLedger {
 public:
  SendLedger(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout);
  ~SendLedger();  // announcements not yet sent are dropped: the group is going away
  SendLedger(const SendLedger&) = delete;
  SendLedger& operator=(const SendLedger&) = delete;

  // A send from this rank to `dst` was issued (it is announced soon after).
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
  void announceLoop();

  c10::intrusive_ptr<c10d::Store> store_;
  std::mutex storeMu_;  // one store request at a time from this group
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::vector<int64_t> received_;  // per source: receives posted (worker thread only)
  int next_ = 0;
  std::atomic<bool> cancelled_{false};
  // Sends per destination not yet announced, and the thread announcing them.
  std::mutex pendingMu_;
  std::condition_variable pendingCv_;
  std::vector<int64_t> pending_;
  bool stop_ = false;
  std::thread announcer_;
};

}  // namespace torch_gyre
