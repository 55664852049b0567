// Point-to-point on device memory by the copy engines: ncclSend/ncclRecv
// (and AlltoAll, Gather, Scatter, which are groups of them) between ranks
// whose buffers this process can address.
//   self copy     a rank's send to itself meets its receive from itself, in
//                 call order: one device-to-device copy on the stream;
//   process copy  ranks of one process (one GPU or several): the pair meets
//                 in the communicator's CopyExchange (copy_exchange.h) and
//                 the side that arrives second copies the buffer, on its own
//                 stream, between the two sides' events; no SM, no host hop;
//   kernel copy   ranks of one process on one GPU, captured into CUDA
//                 graphs: one point-to-point kernel per rank and batch,
//                 pairs ordered by flags (captured_copies.h);
//   IPC copy      ranks of other processes on this host whose GPUs reach
//                 this one: the receiver pulls through CUDA IPC between
//                 stream-memory-operation flags (ipc_copies.h);
//   staged        everything else (other hosts, buffers that cannot be
//                 shared, calls under CUDA-graph capture between two
//                 ranks, GYRE_DEVICE_PATH=staged): staging.h.
// Every rank of a pair decides alike: the path depends on where the peer
// lives (both sides know) and on capture (see docs/ARCHITECTURE.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/debug/deadline.h"
#include "src/device/buffer_pool.h"
#include "src/device/copy/captured_copies.h"
#include "src/device/copy/copy_exchange.h"
#include "src/device/copy/ipc_copies.h"
#include "src/device/device_comm.h"
#include "src/device/on_device.h"
#include "src/device/stream_completions.h"

namespace gyre {

// Which path a send/recv took (NCCL_DEBUG=INFO names it per call; tests
// read the counts).
enum class P2PPath : int { SelfCopy = 0, ProcessCopy = 1, IpcCopy = 2, Staged = 3, KernelCopy = 4 };
constexpr int kP2PPaths = 5;
const char* p2pPathName(P2PPath p);

struct CopyState {
  // Shared with the communicator's other ranks in this process; null when
  // this rank is the only one here.
  CopyExchange* exchange = nullptr;
  std::vector<bool> inThisProcess;  // by rank
  std::unique_ptr<IpcCopyState> ipc;  // peers in other processes of this host; null if none
  std::unique_ptr<CapturedCopies> captured;  // with `exchange`: captured pairs' flags
  StreamCompletions lastCopies;     // destroy waits for these
  std::atomic<uint64_t> calls[kP2PPaths] = {};
  // Device scratch for sends whose buffer a receive of the same group
  // overwrites (in-place AlltoAll): taken per call, back once its stream is past it.
  std::mutex scratchMutex;
  BufferPool scratch;
};

// At init: which peers share this process, and their exchange. All ranks
// call it (it meets over the bootstrap when some process holds several).
ncclResult_t setupPeerCopies(DeviceComm* comm, const Deadline& deadline);

// What a copy path still has to wait for once every pair of a batch is
// offered (its first sides' waits for their peers).
using AfterOffers = std::vector<std::function<ncclResult_t()>>;

// Which path `c` (a send or receive) takes.
P2PPath p2pPathOf(const DeviceRequest& c);
// Whether kernels on the GPUs at these PCI addresses (PeerInfo::busId) can
// use each other's memory: the same GPU, or peer access both ways.
bool kernelsReachEachOther(int64_t busId, int64_t peerBusId);

// Bytes a send or receive moves, and its API name for messages.
size_t p2pBytes(const DeviceRequest& c);
inline const char* p2pCallName(const DeviceRequest& c) { return c.isSend ? "ncclSend" : "ncclRecv"; }

// Fails `c`'s communicator, naming the call, its peer, the path (`path`)
// and `why`, and telling the peer.
ncclResult_t failP2PCall(const DeviceRequest& c, ncclResult_t code, const char* path, const std::string& why);

// The first side of an in-process pair (`t`): waits until the second side
// made its call and queued the copy (*done: its event, or null when the
// pair meets by flags), failing the call as on `path` otherwise;
// *withdrawn: the offer was taken back (timeout, abort), so no copier will
// wait on its ready event.
ncclResult_t awaitPairedCall(const DeviceRequest& c, const CopyExchange::Ticket& t, const char* path,
                             EventHandle* done, bool* withdrawn);

// Whether a receive of the same communicator in `batch` writes over `send`'s
// buffer (in-place AlltoAll): the send then goes from a scratch copy of it,
// made before this rank says it is ready, so no peer's write can come first.
bool sendOverwrittenInBatch(const DeviceRequest& send, const std::vector<const DeviceRequest*>& batch);

// Counts `c` as taking `path` and names it at NCCL_DEBUG=INFO.
void countP2PPath(const DeviceRequest& c, P2PPath path);

// Device scratch from the communicator's pool, for a send whose buffer a
// receive of the same batch overwrites; returned once `stream` is past the
// work queued on it so far (null: at once).
ncclResult_t takeCopyScratch(DeviceComm* comm, size_t bytes, void** out, size_t* capacity);
ncclResult_t returnCopyScratch(DeviceComm* comm, void* buffer, size_t capacity, StreamHandle stream);

// Runs the send/recv calls the copy paths take (self and process copies,
// in group order); those that stage are appended to `staged`. Returns once
// every copy is queued on its streams.
ncclResult_t launchCopyCalls(const std::vector<DeviceRequest>& calls, std::vector<DeviceRequest>* staged);

// Destroy/abort: waits up to `seconds` for queued copies (abort first
// releases their waits on peers), then lets go of the exchange, the IPC
// state and the scratch buffers. False if copies were still queued.
bool drainPeerCopies(DeviceComm* comm, bool abort, double seconds);

}  // namespace gyre
