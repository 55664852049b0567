// Connections a listener has accepted but that have not yet said who they
// are (their fixed-size hello). Read without waiting, so that one caller that
// connects and sends nothing — a port scan, a stuck or hostile client — holds
// up no one: the listener goes on accepting and reading the others, and drops
// the silent one when its time is up. Used by each rank's acceptor and by the
// rendezvous root.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "src/bootstrap/socket.h"
#include "src/debug/error.h"

namespace gyre {

// How long one accept waits while callers are pending, so their hellos are
// read in between.
constexpr int64_t kPendingSliceMs = 20;

template <typename Hello>
class PendingHellos {
 public:
  void add(Socket socket, const NetAddress& from, double helloSeconds) {
    items_.push_back({std::move(socket), from, Hello{}, 0, Deadline::afterSeconds(helloSeconds)});
  }
  bool empty() const { return items_.empty(); }
  void clear() { items_.clear(); }

  // Reads what each pending caller sent. For each whose hello is complete,
  // or who closed or ran out of time (complete = false), calls
  // done(Socket&, const NetAddress&, const Hello&, bool complete) and forgets it.
  template <typename Done>
  void poll(Done&& done) {
    for (size_t i = 0; i < items_.size();) {
      Item& p = items_[i];
      size_t got = 0;
      ncclResult_t r;
      {
        TentativeFailures attempt;  // a caller that closes early is done() with complete = false
        r = p.socket.tryRecv(reinterpret_cast<char*>(&p.hello) + p.got, sizeof(Hello) - p.got, &got, "hello");
      }
      p.got += got;
      const bool complete = p.got == sizeof(Hello);
      if (!complete && r == ncclSuccess && !p.until.expired()) {
        ++i;
        continue;
      }
      Item item = std::move(p);
      items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(i));
      done(item.socket, item.from, item.hello, complete);
    }
  }

 private:
  struct Item {
    Socket socket;
    NetAddress from;
    Hello hello;
    size_t got;      // bytes of the hello read so far
    Deadline until;  // dropped if the hello is not complete by then
  };
  std::vector<Item> items_;
};

// Accepts one connection: while callers are pending, in a slice of
// kPendingSliceMs (*sliceEnded tells that it ended with nothing accepted, which
// is no failure); otherwise until `deadline`.
inline ncclResult_t acceptAround(const Socket& listener, bool pending, const Deadline& deadline,
                                 const std::atomic<bool>* abort, const char* what, Socket* out, NetAddress* from,
                                 bool* sliceEnded) {
  *sliceEnded = false;
  const bool slicing = pending && !deadline.expired();
  if (!slicing) return listener.acceptOne(out, from, deadline, abort, what);
  // A slice that ends with no caller is no failure: it must not reach the
  // log or another thread's ncclGetLastError.
  TentativeFailures attempt;
  const ncclResult_t r = listener.acceptOne(out, from, Deadline::afterMs(kPendingSliceMs), abort, what);
  if (r != ncclSuccess && !(abort && abort->load())) {
    *sliceEnded = true;
    return ncclSuccess;
  }
  attempt.keep();
  return r;
}

}  // namespace gyre
