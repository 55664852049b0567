// Send/recv between ranks of different processes on one host whose GPUs
// reach each other (the same GPU, or peer access over NVLink or PCIe): the
// receiver pulls the sender's buffer with one copy-engine copy through its
// CUDA IPC mapping (cached per allocation, ipc_registry.h). No SM runs, so
// processes that time-slice one GPU do not wait for each other's kernels.
//
// Per send/recv pair (s -> r, the k-th of the pair), with v = k + 1:
//   s, host:   posts a note (its allocation, offset, bytes) in the host's
//              ProcessMailbox; never waits (unless r is a whole ring behind);
//   r, host:   takes the note (waiting for it, bounded by GYRE_TIMEOUT);
//   s, stream: writes sendReady[s] = v in r's inbox (its buffer is ready),
//              later waits for copyDone[r] >= v in its own inbox;
//   r, stream: waits for sendReady[s] >= v in its own inbox, copies, writes
//              copyDone[r] = v in s's inbox.
// A batch's stream work goes in this order: copies of sends a receive of the
// same batch overwrites (in-place AlltoAll) into scratch, every sendReady,
// every receive's wait-copy-done, every send's wait. Every wait is then on
// a write queued ahead of any wait of its writer, so no two streams wait on
// each other. A send whose buffer cannot be shared (not cudaMalloc'd) says
// so in its note, and both sides stage that call. A send from a registered
// window names the window and offset instead of its allocation: the
// receiver mapped the window at registration (src/device/peer_windows.h).
//
// Captured into CUDA graphs (both sides must be), a pair's exchange owns a
// slot of flags instead: the sender writes ready = 1 in the receiver's
// inbox and later waits for done in its own and clears it; the receiver
// waits for ready and clears it, copies, and writes done = 1 in the
// sender's. Cleared flags let every launch of the two graphs meet afresh
// (src/device/flag_ops.h). A pair has kCapturedPairSlots such exchanges;
// later captures stage.
//
// Inboxes are host memory in the mailbox's shared segment, which every
// process registers for its device (cudaHostRegister): peers' streams write
// flags there and each rank's streams wait only on its own. So a rank's host
// releases its waits with plain stores when a peer dies, stalls past
// GYRE_TIMEOUT, or the communicator is aborted, without touching its peers
// and without a stream command, which could queue behind the very wait it
// releases (CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream of a device on
// one hardware queue). The watchdog reads them without the device.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "include/gyre.h"
#include "src/debug/deadline.h"
#include "src/device/copy/ipc_mapping_cache.h"
#include "src/device/copy/process_mailbox.h"
#include "src/device/device_comm.h"

namespace gyre {

constexpr int kCapturedPairSlots = 256;

struct IpcCopyState {
  ProcessMailbox mailbox;
  std::vector<bool> peers;            // by rank: pairs with this rank copy by IPC
  // [kSendReady][rank], [kCopyDone][rank], then captured exchanges'
  // [ready][rank][slot], [done][rank][slot]: as the device addresses it, and
  // as the host does.
  uint32_t* inbox = nullptr;
  uint32_t* inboxHost = nullptr;
  std::vector<uint32_t*> peerInbox;   // by rank, as this device addresses it (null where not a peer)
  void* registered = nullptr;         // the mailbox's inboxes, registered for the device
  uint32_t* devInboxes = nullptr;     // the same, as the device addresses them
  IpcMappingCache mappings;           // senders' buffers mapped here (ipc_mapping_cache.h)
  std::vector<uint64_t> sendSeq, recvSeq;  // by peer: exchanges so far
  std::vector<uint32_t> capturedSends;     // by peer: capture slots taken
  std::unique_ptr<std::atomic<bool>[]> capturedWith;  // by peer: some graph waits on it (the watchdog reads it)
  std::vector<void*> capturedScratch;      // copies of captured sends a receive overwrites
  std::atomic<uint64_t> windowed{0};       // receives whose sender's buffer was a registered window
  // Flag values this rank's streams wait for, by peer (the watchdog's view).
  std::mutex waitsMutex;
  std::vector<uint32_t> awaitedReady, awaitedDone;
  // Watchdog.
  std::thread watchdog;
  std::mutex watchMutex;
  std::condition_variable wake;
  bool stopping = false;
  std::atomic<bool> released{false};
};

// At init, after setupPeerCopies found the ranks of this process: which
// peers copy by IPC, the mailbox, the inboxes and the watchdog. All ranks
// call it and agree.
ncclResult_t setupIpcCopies(DeviceComm* comm, const Deadline& deadline);

// Whether a send/recv with `peer` goes by IPC copy.
bool copiesByIpc(const DeviceComm* comm, int peer);

// Queues the IPC copies of one batch (all calls of one communicator's rank
// with IPC peers, group order); calls whose sender cannot share its buffer
// go to `staged` on both sides.
ncclResult_t launchIpcCopies(const std::vector<const DeviceRequest*>& calls, std::vector<DeviceRequest>* staged);

// The direct path's inboxes (direct_calls.h) follow each rank's IPC-copy
// flags in the same registered host memory: rank `rank`'s, as this device
// (*device) and this host (*host) address it. False where this rank's
// inboxes are not registered.
bool directInboxOf(const DeviceComm* comm, int rank, uint32_t** device, uint32_t** host);

// Abort: satisfies every wait this rank's streams have on its inbox.
void releaseIpcWaits(DeviceComm* comm);

// Destroy/abort, after this rank's streams drained (or not: abort releases
// the waits first): stops the watchdog, unmaps the peers, frees the inbox.
void releaseIpcCopies(DeviceComm* comm, bool abort);

}  // namespace gyre
