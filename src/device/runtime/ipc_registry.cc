#include "src/device/runtime/ipc_registry.h"

#include <map>
#include <mutex>
#include <utility>

#include "src/debug/error.h"
#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {

constexpr size_t kMaxOwnHandles = 1024;  // handles of freed allocations are never asked for again

struct Block {
  void* opened = nullptr;  // what ipcOpenHandle returned (for ipcCloseHandle)
  char* localBase = nullptr;  // the block's base as mapped here
  int holders = 0;
};

struct Registry {
  std::mutex mutex;
  std::map<uint64_t, IpcHandle> ownHandles;                     // by buffer id
  std::map<uint64_t, Block> blocks;                            // by serial (one per successful open)
  std::map<std::pair<int64_t, uint64_t>, uint64_t> latestAt;   // (pid, block base there) -> serial
  std::map<std::pair<int64_t, uint64_t>, uint64_t> byBuffer;   // (pid, buffer id) -> serial
  uint64_t nextSerial = 0;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: communicators may outlive static destructors
  return *r;
}

}  // namespace

bool describeOwnAllocation(const void* p, size_t bytes, SharedAllocation* out, uint64_t* offset) {
  DeviceRuntime* rt = deviceRuntime();
  AllocationInfo info;
  if (rt->allocationOf(p, &info) != ncclSuccess) return false;
  *offset = static_cast<uint64_t>(static_cast<const char*>(p) - static_cast<const char*>(info.base));
  if (*offset + bytes > info.size) return false;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.ownHandles.find(info.bufferId);
  if (it == r.ownHandles.end()) {
    if (r.ownHandles.size() >= kMaxOwnHandles) r.ownHandles.clear();
    IpcHandle made;
    if (rt->ipcGetHandle(info.base, &made) != ncclSuccess) return false;
    it = r.ownHandles.emplace(info.bufferId, made).first;
  }
  out->handle = it->second;
  out->bufferId = info.bufferId;
  out->base = reinterpret_cast<uint64_t>(info.base);
  out->blockBase = reinterpret_cast<uint64_t>(info.blockBase);
  return true;
}

namespace {

// r.mutex held. Takes a hold on the block of `a`, opening it if need be.
ncclResult_t holdBlock(Registry& r, int64_t ownerPid, const SharedAllocation& a, uint64_t* block, void** base) {
  const uint64_t inBlock = a.base - a.blockBase;
  uint64_t serial = 0;
  auto known = r.byBuffer.find({ownerPid, a.bufferId});
  if (known != r.byBuffer.end() && r.blocks.count(known->second)) {
    serial = known->second;
  } else {
    void* opened = nullptr;
    bool alreadyMapped = false;
    ncclResult_t res = deviceRuntime()->ipcOpenHandle(a.handle, &opened, &alreadyMapped);
    if (res == ncclSuccess) {
      // A new block (or a new one at a freed block's address: the old
      // mapping stays until its holders let go).
      serial = ++r.nextSerial;
      r.blocks[serial] = Block{opened, static_cast<char*>(opened) - inBlock, 0};
      r.latestAt[{ownerPid, a.blockBase}] = serial;
    } else if (alreadyMapped) {
      // Its block is open already: the block last opened at that address.
      auto at = r.latestAt.find({ownerPid, a.blockBase});
      if (at == r.latestAt.end() || !r.blocks.count(at->second))
        return fail(ncclUnhandledCudaError, "cudaIpcOpenMemHandle: the block holding process %lld's buffer is "
                    "mapped here already, but not by gyre (the application opened it?)", (long long)ownerPid);
      serial = at->second;
    } else {
      return res;
    }
    r.byBuffer[{ownerPid, a.bufferId}] = serial;
  }
  Block& b = r.blocks[serial];
  ++b.holders;
  *block = serial;
  *base = b.localBase + inBlock;
  return ncclSuccess;
}

// r.mutex held. The last holder of a block closes it.
void letGo(Registry& r, uint64_t serial) {
  auto it = r.blocks.find(serial);
  if (it == r.blocks.end() || --it->second.holders > 0) return;
  deviceRuntime()->ipcCloseHandle(it->second.opened);
  r.blocks.erase(it);
  // Lookups that led to it now miss and open afresh.
  for (auto b = r.byBuffer.begin(); b != r.byBuffer.end();) b = b->second == serial ? r.byBuffer.erase(b) : ++b;
  for (auto l = r.latestAt.begin(); l != r.latestAt.end();) l = l->second == serial ? r.latestAt.erase(l) : ++l;
}

}  // namespace

ncclResult_t mapPeerAllocation(int64_t ownerPid, const SharedAllocation& a, std::set<uint64_t>* held, void** base) {
  RelaxedCapture relaxed;  // a captured call opens its peer's buffer while the application captures
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  uint64_t serial = 0;
  GYRE_CHECK(holdBlock(r, ownerPid, a, &serial, base));
  if (!held->insert(serial).second) letGo(r, serial);  // one hold per set
  return ncclSuccess;
}

void releasePeerBlocks(std::set<uint64_t>* held) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (uint64_t serial : *held) letGo(r, serial);
  held->clear();
}

ncclResult_t mapPeerBlock(int64_t ownerPid, const SharedAllocation& a, uint64_t* block, void** base) {
  RelaxedCapture relaxed;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return holdBlock(r, ownerPid, a, block, base);
}

void releasePeerBlock(uint64_t block) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  letGo(r, block);
}

}  // namespace gyre
