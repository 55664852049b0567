#include "tests/support/fake_cuda/fake_devices.h"

#include <cstdio>
#include <iterator>

#include "src/kernels/device_work.h"
#include "src/kernels/direct_work.h"
#include "src/kernels/flag_work.h"
#include "src/kernels/pair_copy_work.h"

namespace gyre {

void FakeDevices::own(const void* base, size_t size, int device, int mappedBy) {
  std::lock_guard<std::mutex> lock(mutex_);
  owned_[base] = Owned{size, device, mappedBy};
}

void FakeDevices::disown(const void* base) {
  std::lock_guard<std::mutex> lock(mutex_);
  owned_.erase(base);
}

int FakeDevices::ownerOf(const void* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = owned_.upper_bound(p);
  if (it == owned_.begin()) return -1;
  --it;
  if (static_cast<const char*>(p) >= static_cast<const char*>(it->first) + it->second.size) return -1;
  return it->second.device;
}

FakeDevices::Enable FakeDevices::enablePeerAccess(int device, int peer) {
  if (device < 0 || device >= kCount || peer < 0 || peer >= kCount) return Enable::kInvalidDevice;
  if (device == peer) return Enable::kSameDevice;
  std::lock_guard<std::mutex> lock(mutex_);
  if (peer_[device][peer]) return Enable::kAlreadyEnabled;
  peer_[device][peer] = true;
  return Enable::kDone;
}

std::string FakeDevices::unreachable(int device, const volatile void* pointer, const char* what) {
  const void* p = const_cast<const void*>(pointer);
  if (!p) return "";
  int owner = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = owned_.upper_bound(p);
    if (it == owned_.begin()) return "";
    --it;
    const Owned& o = it->second;
    if (static_cast<const char*>(p) >= static_cast<const char*>(it->first) + o.size) return "";
    if (o.device == device || o.mappedBy == device || peer_[device][o.device]) return "";
    owner = o.device;
  }
  char text[320];
  snprintf(text, sizeof(text),
           "an illegal memory access was encountered (cudaErrorIllegalAddress): %s on device %d touched %p, memory of "
           "device %d, without peer access from device %d to device %d (cudaDeviceEnablePeerAccess)",
           what, device, p, owner, device, owner);
  return text;
}

namespace {

// The first of `pointers` that `device` cannot reach, as FakeDevices::unreachable says it.
template <typename... Ptrs>
std::string firstUnreachable(FakeDevices* d, int device, const char* what, Ptrs... pointers) {
  std::string why;
  ((why.empty() ? (void)(why = d->unreachable(device, pointers, what)) : (void)0), ...);
  return why;
}

std::string fifoUnreachable(FakeDevices* d, int device, const Fifo& f) {
  return firstUnreachable(d, device, "the collective kernel", f.slots, f.meta, f.tail, f.head, f.linePayloads,
                          f.llSlots);
}

}  // namespace

std::string FakeDevices::unreachable(int device, const DeviceLaunch& launch) {
  const char* what = "the collective kernel";
  std::string why = firstUnreachable(this, device, what, launch.blockFirst, launch.items);
  for (int c = 0; c < launch.ncalls && why.empty(); ++c) {
    const DeviceCall& call = launch.calls[c];
    why = firstUnreachable(this, device, what, call.lanes, call.buffers[0], call.buffers[1], call.scalarPtr,
                           call.status, call.peerGone);
    for (int l = 0; l < call.nlanes && why.empty(); ++l) {
      const DeviceLane& lane = call.lanes[l];
      why = unreachable(device, lane.steps, what);
      for (int k = 0; k < lane.nsend && why.empty(); ++k) why = fifoUnreachable(this, device, lane.send[k]);
      for (int k = 0; k < lane.nrecv && why.empty(); ++k) why = fifoUnreachable(this, device, lane.recv[k]);
    }
  }
  return why;
}

std::string FakeDevices::unreachable(int device, const DirectCall& call) {
  const char* what = "the direct kernel";
  std::string why = unreachable(device, call.abort, what);
  for (int k = 0; k < call.nsrc && why.empty(); ++k)
    why = firstUnreachable(this, device, what, call.src[k], call.sourceScalarPtr[k]);
  for (int k = 0; k < call.ndst && why.empty(); ++k) why = unreachable(device, call.dst[k], what);
  return why;
}

std::string FakeDevices::unreachable(int device, const FlagOps& ops) {
  const char* what = "the flag kernel";
  std::string why = firstUnreachable(this, device, what, ops.abort, ops.timedOut, ops.stopOnTimeout);
  for (int i = 0; i < ops.n && why.empty(); ++i) why = unreachable(device, ops.ops[i].flag, what);
  return why;
}

std::string FakeDevices::unreachable(int device, const PairCopyWork& work) {
  const char* what = "the point-to-point kernel";
  std::string why = unreachable(device, work.abort, what);
  for (int i = 0; i < work.n && why.empty(); ++i)
    why = firstUnreachable(this, device, what, work.pairs[i].flags, work.pairs[i].src, work.pairs[i].dst);
  return why;
}

}  // namespace gyre
