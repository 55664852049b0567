#include "src/device/copy/captured_copies.h"

#include <algorithm>
#include <map>
#include <string>

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/copy/copy_calls.h"
#include "src/device/copy/copy_exchange.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/runtime.h"
#include "src/device/shared_streams.h"
#include "src/device/stream_completions.h"

namespace gyre {
namespace {

constexpr size_t kFlagsPerBlock = 1024;

constexpr const char* kPath = "peers in one process, captured point-to-point kernel";

ncclResult_t failPair(const DeviceRequest& c, ncclResult_t code, const std::string& why) {
  return failP2PCall(c, code, kPath, why);
}

// A zeroed device allocation the communicator keeps until destroy. The
// first captured pair makes it, on the capturing thread: relaxed, so the
// allocation does not invalidate the application's capture.
ncclResult_t ownedZeroed(CapturedCopies& s, size_t bytes, void** out) {
  DeviceRuntime* rt = deviceRuntime();
  RelaxedCapture relaxed;
  GYRE_CHECK(rt->deviceAlloc(bytes, out));
  ncclResult_t r = rt->memsetSync(*out, 0, bytes);
  if (r != ncclSuccess) {
    rt->deviceFree(*out);
    return r;
  }
  s.blocks.push_back(*out);
  return ncclSuccess;
}

ncclResult_t takeFlags(DeviceComm* comm, PairFlags** out) {
  CapturedCopies& s = *comm->copies->captured;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.abort) {
    void *host = nullptr, *device = nullptr;
    GYRE_CHECK(deviceRuntime()->allocMapped(2 * sizeof(uint32_t), &host, &device));  // zeroed
    s.abortHost = static_cast<volatile uint32_t*>(host);
    s.timedOutHost = s.abortHost + 1;
    s.abort = static_cast<uint32_t*>(device);
  }
  if (s.freeFlags.empty()) {
    void* block = nullptr;
    GYRE_CHECK(ownedZeroed(s, kFlagsPerBlock * sizeof(PairFlags), &block));
    for (size_t i = kFlagsPerBlock; i-- > 0;) s.freeFlags.push_back(static_cast<PairFlags*>(block) + i);
  }
  *out = s.freeFlags.back();
  s.freeFlags.pop_back();
  return ncclSuccess;
}

void giveBackFlags(DeviceComm* comm, PairFlags* flags) {
  CapturedCopies& s = *comm->copies->captured;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.freeFlags.push_back(flags);
}

// One rank's share of the batch: its kernel's pairs, the streams its calls
// name, copies of sends its receives overwrite, and its pairings still to hear
// from.
struct RankBatch {
  std::vector<StreamHandle> streams;
  PairCopyWork work;
  std::vector<std::pair<void*, const DeviceRequest*>> scratchCopies;
  std::vector<std::pair<const DeviceRequest*, CopyExchange::Ticket>> firsts;
};

ncclResult_t pairUp(const DeviceRequest& c, const std::vector<const DeviceRequest*>& calls, RankBatch* b) {
  DeviceComm* comm = c.comm;
  CopyExchange& x = *comm->copies->exchange;
  CopyExchange::Offer mine;
  mine.from = c.isSend ? comm->rank : c.root;
  mine.to = c.isSend ? c.root : comm->rank;
  mine.isSend = c.isSend;
  mine.buffer = c.isSend ? const_cast<void*>(c.input) : c.output;
  mine.bytes = p2pBytes(c);
  mine.captured = true;
  if (c.isSend && sendOverwrittenInBatch(c, calls)) {
    // Every launch copies into it again: the graph owns it until destroy.
    void* scratch = nullptr;
    {
      std::lock_guard<std::mutex> lock(comm->copies->captured->mutex);
      GYRE_CHECK(ownedZeroed(*comm->copies->captured, mine.bytes, &scratch));
    }
    b->scratchCopies.push_back({scratch, &c});
    mine.buffer = scratch;
  }
  GYRE_CHECK(takeFlags(comm, &mine.flags));
  CopyExchange::Ticket ticket;
  CopyExchange::Offer other;
  std::string error;
  if (!x.offer(mine, &ticket, &other, &error)) {
    PairCopy& first = b->work.pairs[b->work.n++];
    first.flags = mine.flags;
    first.role = PairRole::kFirst;
    first.peer = c.root;
    b->firsts.push_back({&c, ticket});
    return ncclSuccess;
  }
  if (!error.empty()) {
    giveBackFlags(comm, mine.flags);
    return failPair(c, ncclRemoteError, error);
  }
  const CopyExchange::Offer& send = mine.isSend ? mine : other;
  const CopyExchange::Offer& recv = mine.isSend ? other : mine;
  error = CopyExchange::mismatch(mine, other);
  x.complete(ticket, nullptr, error);
  if (!error.empty()) {
    giveBackFlags(comm, mine.flags);
    return failPair(c, ncclInvalidUsage, error);
  }
  PairCopy& second = b->work.pairs[b->work.n++];
  second.flags = other.flags;
  second.role = PairRole::kSecond;
  second.peer = c.root;
  second.src = send.buffer;
  second.dst = recv.buffer;
  second.bytes = send.bytes;
  // Its blocks count their arrivals in this rank's own slot (the graph
  // holds it, as the first side holds its own), never on the peer's GPU.
  second.arrived = &mine.flags->arrived;
  return ncclSuccess;
}

// The rank's stream work: its streams joined into the first, the scratch
// copies, the kernel, the others joined back.
ncclResult_t launchBatch(DeviceComm* comm, RankBatch& b) {
  DeviceRuntime* rt = deviceRuntime();
  OnDevice onDevice(comm->cudaDev);
  StreamHandle driver = b.streams.front();
  GYRE_CHECK(joinOthers(b.streams, driver, true));
  for (const auto& [scratch, send] : b.scratchCopies)
    GYRE_CHECK(rt->copyAsync(scratch, send->input, p2pBytes(*send), driver));
  b.work.abort = comm->copies->captured->abort;
  b.work.timedOut = comm->copies->captured->abort + 1;
  b.work.timeoutNs = static_cast<uint64_t>(comm->collTimeoutSeconds * 1e9);
  GYRE_CHECK(rt->launchPairCopies(b.work, driver));
  return joinOthers(b.streams, driver, false);
}

}  // namespace

ncclResult_t copyCapturedInProcess(const std::vector<const DeviceRequest*>& calls,
                                   std::vector<std::function<ncclResult_t()>>* after) {
  std::map<DeviceComm*, RankBatch> batches;
  std::vector<DeviceComm*> order;
  for (const DeviceRequest* c : calls) {
    auto [it, fresh] = batches.try_emplace(c->comm);
    if (fresh) order.push_back(c->comm);
    RankBatch& b = it->second;
    if (std::find(b.streams.begin(), b.streams.end(), c->stream) == b.streams.end()) b.streams.push_back(c->stream);
  }
  // Checked before any offer, so no peer pairs with a call that then fails.
  GYRE_CHECK(refuseSharedStreams(calls, kPath));
  for (DeviceComm* comm : order) {
    size_t n = std::count_if(calls.begin(), calls.end(), [&](const DeviceRequest* c) { return c->comm == comm; });
    if (n > kMaxPairCopies)
      return fail(ncclInvalidUsage, "rank %d: %zu captured sends and receives with ranks of this process in one "
                  "group; at most %d fit one point-to-point kernel, so split the group", comm->rank, n,
                  kMaxPairCopies);
  }
  ncclResult_t r = ncclSuccess;
  for (const DeviceRequest* c : calls) {
    OnDevice onDevice;  // the pair's flags and scratch on its rank's GPU
    if ((r = onDevice.enter(c->comm->cudaDev, c->comm->rank)) != ncclSuccess) break;
    if ((r = pairUp(*c, calls, &batches[c->comm])) != ncclSuccess) break;
  }
  // Launched even after a failure: peers that paired may wait on these flags.
  for (DeviceComm* comm : order) {
    ncclResult_t e = launchBatch(comm, batches[comm]);
    if (r == ncclSuccess) r = e;
  }
  if (r == ncclSuccess)
    for (const DeviceRequest* c : calls) countP2PPath(*c, P2PPath::KernelCopy);
  std::vector<std::pair<const DeviceRequest*, CopyExchange::Ticket>> firsts;
  for (DeviceComm* comm : order)
    firsts.insert(firsts.end(), batches[comm].firsts.begin(), batches[comm].firsts.end());
  after->push_back([firsts] {
    ncclResult_t r = ncclSuccess;
    for (const auto& [c, ticket] : firsts) {
      EventHandle done = nullptr;  // flags, not events, order this pair
      bool withdrawn = false;
      ncclResult_t e = awaitPairedCall(*c, ticket, kPath, &done, &withdrawn);
      if (r == ncclSuccess) r = e;
    }
    return r;
  });
  return r;
}

void abortCapturedCopies(CapturedCopies* c) {
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->abortHost) __atomic_store_n(c->abortHost, 1u, __ATOMIC_RELEASE);
}

void pollCapturedCopies(DeviceComm* comm) {
  if (!comm->copies || !comm->copies->captured) return;
  CapturedCopies& c = *comm->copies->captured;
  int peer = -1;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    // The kernels store it while this looks.
    const uint32_t timedOut = c.timedOutHost ? __atomic_load_n(c.timedOutHost, __ATOMIC_ACQUIRE) : 0;
    if (timedOut == 0 || c.timeoutReported) return;
    c.timeoutReported = true;
    peer = static_cast<int>(timedOut) - 1;
  }
  ncclResult_t r = fail(ncclRemoteError, "rank %d: the point-to-point kernel of a captured send/recv waited %.0f s "
                        "(GYRE_TIMEOUT) for rank %d's side of the pair; its kernel never ran (a stream that shares "
                        "this one's hardware queue holds it, CUDA_DEVICE_MAX_CONNECTIONS) or its graph was not "
                        "launched", comm->rank, comm->collTimeoutSeconds, peer);
  GYRE_WARN("%s", lastErrorText());
  comm->host->markFailed(r, peer);
}

void releaseCapturedCopies(CapturedCopies* c) {
  std::lock_guard<std::mutex> lock(c->mutex);
  for (void* p : c->blocks) freeAfterDeviceWork(DeferredFree::kDevice, p);
  c->blocks.clear();
  c->freeFlags.clear();
  freeAfterDeviceWork(DeferredFree::kMapped, const_cast<uint32_t*>(c->abortHost));
  c->abort = nullptr;
  c->abortHost = nullptr;
  c->timedOutHost = nullptr;
}

}  // namespace gyre
