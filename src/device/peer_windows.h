// The windows registered on a device communicator (ncclCommWindowRegister),
// as the data paths look them up: where each peer's copy of a window lies in
// this process's address space. Registration exchanged the mappings once (a
// plain pointer for a rank of this process, a CUDA IPC mapping opened once
// for a rank of another process on the node), so a call on a registered
// buffer needs no handle exchange of its own.
//
// Windows are registered collectively and in the same order on every rank,
// so a window's serial (its place in that order) names the same window on
// every rank: a rank can tell a peer "serial s, offset o" and the peer finds
// the address with peerAddressAt().
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace gyre {

struct PeerWindow {
  uint64_t serial = 0;
  char* base = nullptr;  // this rank's buffer
  size_t size = 0;
  // By rank: where that rank's buffer of this window is mapped here
  // (this rank's own is `base`); nullptr where the rank is not reachable by
  // loads and stores (another node, no peer access, a buffer CUDA IPC cannot
  // share).
  std::vector<char*> peerBases;
  std::vector<size_t> peerSizes;  // by rank: the size that rank registered
};

class PeerWindows {
 public:
  void add(const PeerWindow& w);
  void remove(uint64_t serial);

  // The window holding all of this rank's [p, p + bytes): its serial and
  // p's offset in it. False when no window holds the whole range.
  bool locate(const void* p, size_t bytes, uint64_t* serial, size_t* offset) const;

  // Where `peer` has window `serial`'s bytes [offset, offset + bytes), as
  // this process addresses them. False when the window is unknown, the range
  // leaves the peer's window, or the peer is not reachable by loads and
  // stores.
  bool peerAddressAt(uint64_t serial, size_t offset, size_t bytes, int peer, void** out) const;

  // Both at once, for symmetric use: the peer's address of the bytes at the
  // same offset of the same window as this rank's [p, p + bytes).
  bool peerAddress(const void* p, size_t bytes, int peer, void** out) const;

  size_t count() const;

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, PeerWindow> bySerial_;
  std::map<const char*, uint64_t> byBase_;  // this rank's base -> serial
};

}  // namespace gyre
