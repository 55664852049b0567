// The direct executor: ranks that share one GPU run a collective as one pass
// over each other's buffers. Two cases:
//   - ranks of different processes (GYRE_DEVICE_PATH=direct): buffers are
//     mapped by CUDA IPC, calls exchanged through the host's mailbox; every
//     collective goes this way (or is staged, all ranks agreeing);
//   - ranks of one process (GYRE_DEVICE_PATH=auto, calls of at least
//     GYRE_DIRECT_MIN_BYTES, default 0; =direct, all calls): buffers are this
//     process's addresses, calls exchanged through a DirectClique and streams
//     ordered by events (direct_inprocess.h), or, for calls captured into
//     CUDA graphs, by flags the flag kernel waits on; calls under
//     GYRE_DIRECT_MIN_BYTES (and captured calls once every capture slot is
//     taken) run as kernels over FIFOs, which move every byte through a FIFO
//     slot and back (about twice the memory traffic).
// What both share (CallInfo, the agreement check, a rank's share of a call)
// is direct_share.h. The steps below are those of processes sharing a GPU.
// Per call:
//   1. the ranks exchange their call and buffers (so a mismatched call fails
//      on every rank, naming it, and a call some rank cannot take directly —
//      memory that is not cudaMalloc'd — is staged by all);
//   2. on the user's stream: tell every peer "ready" (my earlier work on
//      this stream is done), wait for every peer's ready, run this rank's
//      share (src/kernels/direct_work.h; by default rank 0 runs every share and
//      the others none), tell every peer "done", wait for every peer's done
//      — so no rank's later work touches its buffers while a peer still
//      reads or writes them.
// The signals are 32-bit generation numbers written by stream memory
// operations into each rank's inbox (a call captured into a CUDA graph owns
// a slot of its own instead, of flags each side clears after its wait, so
// every launch of the ranks' graphs meets afresh: src/device/flag_ops.h) (device memory every peer maps), and
// each rank waits only on its own inbox, so a watchdog can release this
// rank's waits (a peer died, abort) without touching its peers. Waiting by
// stream memory operations instead of a spinning kernel matters here:
// without MPS the GPU time-slices between processes, and a kernel that
// spins for a peer's kernel would hold the GPU from it.
//
// Traffic: each rank reads its share of every input and writes it to every
// output — 2·S per rank for AllReduce of S bytes, the minimum.
// Peers' buffers of other processes are mapped through
// src/device/runtime/ipc_registry.h. Both flavours are the fastest paths measured on
// an H100 for their case (docs/PERFORMANCE.md), so auto picks them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "include/gyre.h"
#include "src/device/runtime/runtime.h"
#include "src/device/stream_completions.h"
#include "src/device/device_comm.h"
#include "src/device/direct/direct_share.h"
#include "src/device/spin_watch.h"


namespace gyre {

class Deadline;
class DirectClique;

// Calls of processes captured into graphs that run direct; later captures stage.
constexpr uint32_t kCapturedDirectCalls = 4096;

// Words of one rank's inbox.
size_t directInboxWords(int nranks);

struct DirectState {
  // This rank's inbox: [kReady][peer], [kDone][peer], then per captured call
  // [slot][kReady][peer], [slot][kDone][peer]. Host memory in the host's
  // mailbox, registered for the device (ipc_copies.h), so a release is a
  // host store that no blocked hardware queue holds back (inboxHost); device
  // memory shared by CUDA IPC where that registration failed (inboxHost
  // null: releases are stream writes then).
  uint32_t* inbox = nullptr;
  uint32_t* inboxHost = nullptr;
  std::vector<uint32_t*> peerInboxHost;  // by rank, where inboxHost is set
  std::vector<uint32_t*> peerInbox;  // each rank's inbox as mapped here (this rank's own included)
  std::atomic<uint32_t> generation{0};  // calls run directly so far
  uint64_t callSeq = 0;              // collectives offered to the direct path, checked across ranks
  uint32_t capturedCalls = 0;        // capture slots taken
  // By rank (this one's included): where that rank's captured-call flags
  // are mapped here (direct_share.h, enqueueCapturedCall).
  std::vector<uint32_t*> capturedFlags;
  // Device memory, set when the kernels must not run. Not mapped host
  // memory: every block reads it, and reads over PCIe cost ~1 µs per block
  // on an H100, serialized (a 2 MiB AllReduce took 137 µs).
  uint32_t* abortWord = nullptr;
  // Ranks of one process: what their captured calls' flag kernels watch
  // (the abort word the host sets without a CUDA call) and where a wait
  // that outlasts GYRE_TIMEOUT reports its peer, polled by
  // ncclCommGetAsyncError and each launch (pollDirectTimeout).
  SpinWatch flagWatch;
  DirectClique* clique = nullptr;    // ranks of one process: where they meet (this rank holds a reference)
  size_t minBytes = 0;               // ranks of one process: smaller calls run as kernels
  // Ranks of one process under CUDA_DEVICE_MAX_CONNECTIONS=1: captured
  // collectives are refused (direct_inprocess.h says why).
  bool oneHardwareQueue = false;
  int32_t maxBlocks = 0;             // GYRE_DIRECT_BLOCKS: cap on the direct kernel's grid, 0 for its own
  // GYRE_DIRECT_LEADER (default): rank 0 runs every rank's share with the
  // whole GPU and the others only signal (for processes: one context runs
  // kernels); otherwise each rank runs its own share.
  bool leaderRunsAll = false;
  // Peers' blocks this communicator holds mapped (src/device/runtime/ipc_registry.h).
  std::set<uint64_t> heldBlocks;
  StreamCompletions lastCall;  // destroy waits for these
  std::atomic<uint64_t> callsRun{0};  // for tests: calls that took the direct path
  std::atomic<uint64_t> windowed{0};  // for tests: peers' buffers found in registered windows
  // The last call this rank ran direct, which a sticky CUDA error's report
  // names, and whether that error was reported.
  std::mutex lastRunMutex;
  CallInfo lastRun;
  std::atomic<bool> faulted{false};
  // Watchdog: a peer process that died releases this rank's waits.
  std::thread watchdog;
  std::mutex watchMutex;
  std::condition_variable wake;
  bool stopping = false;
  std::atomic<bool> released{false};
};

// At init, after the executor choice: whether the communicator runs direct
// (above), and if so its inbox, the peers' inboxes and the watchdog. All
// ranks agree.
ncclResult_t setupDirect(DeviceComm* comm, const Deadline& deadline);

// Whether the direct executor takes collective `c` (its size, and a free
// capture slot when captured, for ranks of one process). Every rank decides
// alike for matching calls.
bool takesDirect(const DeviceRequest& c);

// Runs the collectives of a direct communicator (in group order); the ones
// every rank agreed to stage are appended to `staged`.
ncclResult_t launchDirectCalls(const std::vector<DeviceRequest>& calls, std::vector<DeviceRequest>* staged);

// Records `info` as the last call this rank ran direct (after its launch).
void noteDirectRun(DirectState& d, const CallInfo& info);

// A sticky CUDA error since this rank's direct kernels (an illegal address
// in one, say) fails the communicator, naming the last call it ran. Polled
// by ncclCommGetAsyncError and the cross-process watchdog (not at launch):
// ranks of one process have no thread of their own watching.
void checkDirectFault(DeviceComm* comm);

// A captured call's flag kernel that timed out waiting for a peer fails the
// communicator (once), naming the peer and the signal, and stops its other
// waits. Reads mapped host memory only.
void pollDirectTimeout(DeviceComm* comm);

// Destroy/abort: waits (up to `seconds`) for the last calls, stops the
// watchdog, unmaps the peers and frees the inbox. Without abort, the ranks
// meet first so no peer still writes into this rank's inbox.
bool drainDirect(DeviceComm* comm, bool abort, double seconds);

}  // namespace gyre
