// Where the ranks of one communicator that live in one process and share its
// GPU meet to run direct collectives (src/device/direct/direct_calls.h). Their
// buffers are addresses in this process, so a call needs neither CUDA IPC
// nor the bootstrap's sockets: each rank posts what it says of call `seq`
// (its record) and collects everyone's. Posting never waits, so one thread
// that drives every rank in a group posts all their calls first and then
// collects; ranks driven by their own threads meet here.
//
// The clique also owns the ranks' events (what their streams wait on): the
// last rank to let go destroys them, after every rank has drained, so no
// stream still waits on a destroyed event.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "src/debug/deadline.h"

namespace gyre {

class DirectClique {
 public:
  // Made by one rank for `nranks` holders (each calls release() once).
  DirectClique(int nranks, size_t recordBytes);

  void post(int rank, uint64_t seq, const void* record);
  // Every rank's record of call `seq`, by rank, into `out` (nranks records).
  // False when `deadline` passes or `abort` is set first; *missing is then a
  // rank that has not posted it.
  bool collect(uint64_t seq, const Deadline& deadline, const std::atomic<bool>* abort, void* out, int* missing);

  // By rank, each set by its owner at set-up: where its stream stood when it
  // made the call (its input is ready), and after its share of the call ran.
  std::vector<void*> readyEvents, doneEvents;
  // By rank, each set by its owner at set-up: the flags its stream waits on
  // in calls captured into graphs, [slot][phase][peer] (direct_inprocess.cc).
  std::vector<uint32_t*> capturedInboxes;

  // Drops one holder's reference; true for the last, who then destroys the
  // events and frees the inboxes (through `destroyEvent`, `freeDevice`) and
  // deletes the clique.
  bool release(void (*destroyEvent)(void*), void (*freeDevice)(void*));

 private:
  struct Call {
    std::vector<char> records;
    std::vector<bool> posted;
    int nposted = 0;
    int ncollected = 0;
  };
  Call& callOf(uint64_t seq);

  const int nranks_;
  const size_t recordBytes_;
  std::atomic<int> holders_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<uint64_t, Call> calls_;  // posted and not yet collected by every rank
};

}  // namespace gyre
