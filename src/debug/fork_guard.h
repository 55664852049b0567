// What gyre does in a child forked from a process where it was busy.
//
// POSIX lets the child of a multithreaded fork() make only async-signal-safe
// calls until it execs: a lock that one of the parent's other threads held at
// the fork stays locked forever in the child, and the parent's communicators
// (their sockets, shared memory and peers' state) are not the child's. gyre
// therefore counts what makes a fork unsafe: live communicators and the threads
// it starts outside them (a unique id's rendezvous root, the process-wide
// watchers). In a child forked while that count was above zero, every call
// that would touch gyre's state returns ncclInvalidUsage, and
// ncclGetLastError names the fork and what to do instead.
#pragma once

#include "include/gyre.h"

namespace gyre {

// Held for as long as something of gyre's that a fork cannot carry over is
// alive: a member of every communicator, captured by every long-lived thread's
// function (so it is released only when that thread has finished).
class ForkHazard {
 public:
  ForkHazard();
  ~ForkHazard();
  ForkHazard(ForkHazard&& other) noexcept;
  ForkHazard& operator=(ForkHazard&&) = delete;
  ForkHazard(const ForkHazard&) = delete;
  ForkHazard& operator=(const ForkHazard&) = delete;

 private:
  bool held_ = true;
};

// True in a child forked while a ForkHazard was held in the parent.
bool inForkedChild();

// ncclSuccess, or (in such a child) ncclInvalidUsage with the fork named as
// this thread's last error. Takes no lock and allocates nothing: it is the
// one thing such a child may safely do with gyre.
ncclResult_t checkNotForkedChild(const char* caller);

}  // namespace gyre
