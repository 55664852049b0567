// Registered windows (ncclCommWindowRegister) and the one-sided signal
// slots, as the communicator keeps them. Registration is collective: the
// ranks agree on the window (same flags; same size where symmetric), then
// each learns where every peer of its LSA team (the ranks it reaches by
// loads and stores, lsa_team.h) has its buffer — a plain pointer for a rank
// of this process, a CUDA IPC mapping opened once for a rank of another
// process on the node — and publishes that table where device code reads it
// (the ncclWindow_vidmem the handle points to, nccl_device/core.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "include/gyre.h"

namespace gyre {

constexpr uint64_t kWindowMagic = 0x6779726577696e31ull;  // "gyrewin1"

// What the communicator keeps of a window; the handle (ncclWindow_t) points
// to the device-readable ncclWindow_vidmem, which device communicators keep
// in device memory, so the host finds its record by handle.
struct WindowRecord {
  ncclComm* comm = nullptr;
  ncclWindow_t handle = nullptr;
  bool handleOnDevice = false;  // the handle's memory came from the device runtime
  void* buff = nullptr;
  size_t size = 0;
  int flags = 0;
  uint64_t serial = 0;          // registration order, the same on every rank
  int lsaBase = 0, lsaSize = 1; // the LSA team: ranks lsaBase .. lsaBase + lsaSize - 1
  std::vector<char*> peerBases; // by rank, as mapped here (nullptr: not reachable)
  std::vector<size_t> peerSizes; // by rank: what that rank registered
  std::set<uint64_t> heldBlocks;  // CUDA IPC blocks opened for it (src/device/runtime/ipc_registry.h)
  void* ownedMemory = nullptr;  // a device communicator's resources: freed with the window
};

// One-sided signals (ncclSignal, ncclPutSignal, ncclWaitSignal): each rank
// owns one 32-bit slot per peer in device memory, which only that peer
// writes — the count of signals it has sent here — so a signal is a stream
// write of the sender's next count and a wait is a stream wait for the
// count the waiter expects. Set up with the communicator's first window.
struct SignalArea {
  std::mutex mutex;
  uint32_t* mine = nullptr;             // nranks slots; slot p is written by rank p
  std::vector<uint32_t*> atPeer;        // by peer: this rank's slot in that peer's area (nullptr: unreachable)
  std::vector<uint32_t> sent;           // signals sent to each peer
  std::vector<uint32_t> expected;       // signals from each peer waited for so far
  std::set<uint64_t> heldBlocks;
};

// Registers `buff` (collective over comm's ranks). `internal`: a device
// communicator's own resources, with `ownedMemory` to free with it.
ncclResult_t registerWindow(ncclComm* comm, void* buff, size_t size, int flags, const char* fn,
                            void* ownedMemory, WindowRecord** out);
// Unmaps the peers' buffers, frees the handle and forgets the window.
void releaseWindow(ncclComm* comm, WindowRecord* w);

// Frees the communicator's signal slots (at destroy).
void releaseSignals(ncclComm* comm);

// The record of `win` if it is a live window of `comm` (takes
// comm->registrationMutex), else nullptr.
WindowRecord* windowOf(ncclComm* comm, ncclWindow_t win);
// The record of a live window of any communicator (for calls that take no
// communicator: ncclGetLsaDevicePointer), else nullptr.
WindowRecord* anyWindow(ncclWindow_t win);

}  // namespace gyre
