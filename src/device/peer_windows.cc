#include "src/device/peer_windows.h"

namespace gyre {

void PeerWindows::add(const PeerWindow& w) {
  std::lock_guard<std::mutex> lock(mutex_);
  bySerial_[w.serial] = w;
  byBase_[w.base] = w.serial;
}

void PeerWindows::remove(uint64_t serial) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = bySerial_.find(serial);
  if (it == bySerial_.end()) return;
  auto b = byBase_.find(it->second.base);
  if (b != byBase_.end() && b->second == serial) byBase_.erase(b);
  bySerial_.erase(it);
}

bool PeerWindows::locate(const void* p, size_t bytes, uint64_t* serial, size_t* offset) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const char* c = static_cast<const char*>(p);
  // Windows of one rank may overlap (the same buffer registered twice):
  // try each window starting at or below p, nearest first.
  for (auto it = byBase_.upper_bound(c); it != byBase_.begin();) {
    --it;
    const PeerWindow& w = bySerial_.at(it->second);
    const size_t off = static_cast<size_t>(c - w.base);
    if (off <= w.size && bytes <= w.size - off) {
      *serial = w.serial;
      *offset = off;
      return true;
    }
  }
  return false;
}

bool PeerWindows::peerAddressAt(uint64_t serial, size_t offset, size_t bytes, int peer, void** out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = bySerial_.find(serial);
  if (it == bySerial_.end()) return false;
  const PeerWindow& w = it->second;
  if (peer < 0 || peer >= static_cast<int>(w.peerBases.size()) || !w.peerBases[peer]) return false;
  const size_t size = w.peerSizes[peer];
  if (offset > size || bytes > size - offset) return false;
  *out = w.peerBases[peer] + offset;
  return true;
}

bool PeerWindows::peerAddress(const void* p, size_t bytes, int peer, void** out) const {
  uint64_t serial = 0;
  size_t offset = 0;
  return locate(p, bytes, &serial, &offset) && peerAddressAt(serial, offset, bytes, peer, out);
}

size_t PeerWindows::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bySerial_.size();
}

}  // namespace gyre
