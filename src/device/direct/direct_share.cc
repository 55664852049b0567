#include "src/device/direct/direct_share.h"

#include <stdio.h>

#include <algorithm>
#include <cstring>

#include "src/bootstrap/bootstrap.h"
#include "src/call/datatypes.h"
#include "src/debug/error.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/launch_events.h"

namespace gyre {
namespace {

constexpr size_t kMaxMappings = 128;  // peer blocks kept mapped; past this, calls stage

bool sameCall(const CallInfo& a, const CallInfo& b) {
  bool customA = a.redop >= ncclNumOps, customB = b.redop >= ncclNumOps;
  return a.callSeq == b.callSeq && a.count == b.count && a.coll == b.coll && a.datatype == b.datatype &&
         a.root == b.root && (customA ? customB : a.redop == b.redop) && a.captured == b.captured &&
         a.capturedSlot == b.capturedSlot;
}

// Which of a rank's buffers its peers read or write. When one rank runs
// every share (DirectState::leaderRunsAll) it touches every buffer.
bool leaderRunsAll(const DeviceRequest& c) { return c.comm->direct->leaderRunsAll; }
bool inputShared(const DeviceRequest& c, int rank) {
  switch (c.coll) {
    case CollKind::AllReduce: case CollKind::Reduce: case CollKind::ReduceScatter: return true;
    case CollKind::Broadcast: return rank == c.root;
    case CollKind::AllGather: return leaderRunsAll(c);
    default: return false;
  }
}
bool outputShared(const DeviceRequest& c, int rank) {
  switch (c.coll) {
    case CollKind::AllReduce: case CollKind::Broadcast: case CollKind::AllGather: return true;
    case CollKind::Reduce: return rank == c.root;
    case CollKind::ReduceScatter: return leaderRunsAll(c);
    default: return false;
  }
}

// Everyone's input (or output) as this rank addresses it, by rank.
ncclResult_t buffersOf(DeviceComm* comm, const std::vector<CallInfo>& infos, const DeviceRequest& c, bool input,
                       std::vector<char*>* out) {
  out->assign(comm->nranks, nullptr);
  for (int r = 0; r < comm->nranks; ++r) {
    bool shared = input ? inputShared(c, r) : outputShared(c, r);
    if (r == comm->rank) {
      (*out)[r] = static_cast<char*>(input ? const_cast<void*>(c.input) : c.output);
    } else if (shared && comm->direct->clique) {
      (*out)[r] = static_cast<char*>(input ? const_cast<void*>(infos[r].inputPtr) : infos[r].outputPtr);
    } else if (shared) {
      const uint64_t window = input ? infos[r].inputWindow : infos[r].outputWindow;
      const uint64_t offset = input ? infos[r].inputOffset : infos[r].outputOffset;
      void* p = nullptr;
      if (window) {
        if (!comm->windows.peerAddressAt(window - 1, offset, input ? inputBytes(c) : outputBytes(c), r, &p))
          return fail(ncclInvalidUsage, "%s: rank %d's %s buffer is in its registered window #%llu, which rank %d "
                      "has not mapped (deregistered here, or registered by the ranks in a different order)",
                      collName(c.coll), r, input ? "input" : "output", static_cast<unsigned long long>(window - 1),
                      comm->rank);
        comm->direct->windowed.fetch_add(1, std::memory_order_relaxed);
      } else {
        GYRE_CHECK(peerPointer(comm, r, input ? infos[r].input : infos[r].output, offset, &p));
      }
      (*out)[r] = static_cast<char*>(p);
    }
  }
  return ncclSuccess;
}

// Shares [first, first + shares) of [0, count) among `nranks`: split in
// 16-byte units so shares of aligned buffers stay aligned.
void sharesOf(size_t count, size_t elementSize, int first, int shares, int nranks, size_t* begin, size_t* n) {
  size_t unit = std::max<size_t>(1, 16 / elementSize);
  size_t units = (count + unit - 1) / unit;
  size_t lo = units * first / nranks * unit, hi = units * (first + shares) / nranks * unit;
  *begin = std::min(lo, count);
  *n = std::min(hi, count) - *begin;
}

// The call that runs shares [rank, rank + shares) of `c` (shares > 1 only
// for the collectives whose shares are one range of the same buffers).
DirectCall shareCall(const DeviceRequest& c, const std::vector<CallInfo>& infos, const std::vector<char*>& in,
                     const std::vector<char*>& outs, int rank, int shares) {
  DeviceComm* comm = c.comm;
  const int n = comm->nranks;
  const size_t es = datatypeSize(c.datatype);
  DirectCall d;
  d.datatype = static_cast<uint8_t>(c.datatype);
  d.redop = static_cast<uint8_t>(c.op);
  d.nranks = n;
  d.abort = comm->direct->abortWord;
  d.maxBlocks = comm->direct->maxBlocks;
  if (c.scalar.present) {
    // Sources are inputs in rank order: source r takes rank r's scalar.
    d.hasScalar = 1;
    memcpy(d.scalar, c.scalar.value, sizeof(d.scalar));
    for (int r = 0; r < n; ++r) {
      memcpy(d.sourceScalar[r], infos[r].scalar, sizeof(d.sourceScalar[r]));
      d.sourceScalarPtr[r] = infos[r].scalarPtr;
    }
  }
  size_t first = 0, count = 0;
  switch (c.coll) {
    case CollKind::AllReduce: case CollKind::Reduce: case CollKind::Broadcast: {
      sharesOf(c.count, es, rank, shares, n, &first, &count);
      const size_t off = first * es;
      if (c.coll == CollKind::Broadcast) {
        d.src[d.nsrc++] = in[c.root] + off;
      } else {
        for (int r = 0; r < n; ++r) d.src[d.nsrc++] = in[r] + off;
        d.reduce = 1;
      }
      if (c.coll == CollKind::Reduce) d.dst[d.ndst++] = outs[c.root] + off;
      else for (int r = 0; r < n; ++r) d.dst[d.ndst++] = outs[r] + off;
      break;
    }
    case CollKind::ReduceScatter:
      count = c.count;
      for (int r = 0; r < n; ++r) d.src[d.nsrc++] = in[r] + rank * count * es;
      d.dst[d.ndst++] = outs[rank];
      d.reduce = 1;
      break;
    default:  // AllGather (the caller checked)
      count = c.count;
      d.src[d.nsrc++] = in[rank];
      for (int r = 0; r < n; ++r) d.dst[d.ndst++] = outs[r] + rank * count * es;
      break;
  }
  d.count = count;
  return d;
}

bool runsDirect(CollKind coll) {
  switch (coll) {
    case CollKind::AllReduce: case CollKind::Reduce: case CollKind::Broadcast: case CollKind::ReduceScatter:
    case CollKind::AllGather: return true;
    default: return false;
  }
}

}  // namespace

std::string describeInfo(const CallInfo& i) {
  char text[160];
  snprintf(text, sizeof(text), "%s #%llu (count %llu, datatype %d, op %d, root %d%s)",
           collName(static_cast<CollKind>(i.coll)), static_cast<unsigned long long>(i.callSeq),
           static_cast<unsigned long long>(i.count), i.datatype, i.redop, i.root,
           i.captured ? ", captured into a CUDA graph" : "");
  return text;
}

size_t inputBytes(const DeviceRequest& c) {
  return c.count * datatypeSize(c.datatype) * inputBlocks(c.coll, c.comm->nranks);
}
size_t outputBytes(const DeviceRequest& c) {
  return c.count * datatypeSize(c.datatype) * outputBlocks(c.coll, c.comm->nranks);
}

namespace {

// Where this rank's buffer lives for its peers: a registered window (which
// they mapped at registration) or its allocation, shared by CUDA IPC.
bool describeBuffer(DeviceComm* comm, const void* p, size_t bytes, SharedAllocation* allocation, uint64_t* offset,
                    uint64_t* window) {
  uint64_t serial = 0;
  size_t inWindow = 0;
  if (comm->windows.locate(p, bytes, &serial, &inWindow)) {
    *window = serial + 1;
    *offset = inWindow;
    return true;
  }
  return describeOwnAllocation(p, bytes, allocation, offset);
}

}  // namespace

CallInfo describeCall(const DeviceRequest& c, bool capturing) {
  DeviceComm* comm = c.comm;
  CallInfo info;
  info.callSeq = ++comm->direct->callSeq;
  info.count = c.count;
  info.root = c.root;
  info.coll = static_cast<uint8_t>(c.coll);
  info.datatype = static_cast<uint8_t>(c.datatype);
  info.redop = static_cast<uint8_t>(c.op);
  info.inputPtr = c.input;
  info.outputPtr = c.output;
  memcpy(info.scalar, c.scalar.value, sizeof(info.scalar));
  info.scalarPtr = c.scalar.devicePtr;
  bool ok = comm->direct->heldBlocks.size() < kMaxMappings;
  // A captured call owns a slot of flags for the communicator's life; once
  // every slot is taken, captured calls stage (processes) or run as kernels
  // (ranks of one process: takesDirect), all ranks alike, as they capture
  // alike.
  info.captured = capturing ? 1 : 0;
  if (capturing && comm->direct->capturedCalls < kCapturedDirectCalls)
    info.capturedSlot = ++comm->direct->capturedCalls;
  else if (capturing)
    ok = false;
  if (comm->direct->clique) {
    info.usable = ok ? 1 : 0;  // addresses of this process: nothing to map
    return info;
  }
  // Peers apply this rank's scalar to its input; one in device memory of
  // this process they cannot read: stage.
  if (c.scalar.devicePtr) ok = false;
  if (ok && inputShared(c, comm->rank))
    ok = describeBuffer(comm, c.input, inputBytes(c), &info.input, &info.inputOffset, &info.inputWindow);
  if (ok && outputShared(c, comm->rank))
    ok = describeBuffer(comm, c.output, outputBytes(c), &info.output, &info.outputOffset, &info.outputWindow);
  info.usable = ok ? 1 : 0;
  return info;
}

// A peer's buffer as this process addresses it.
ncclResult_t peerPointer(DeviceComm* comm, int peer, const SharedAllocation& a, uint64_t offset, void** out) {
  void* base = nullptr;
  GYRE_CHECK(mapPeerAllocation(comm->bootstrap->peers()[peer].pid, a, &comm->direct->heldBlocks, &base));
  *out = static_cast<char*>(base) + offset;
  return ncclSuccess;
}

ncclResult_t buildDirectCalls(const DeviceRequest& c, const std::vector<CallInfo>& infos,
                              std::vector<DirectCall>* out) {
  DeviceComm* comm = c.comm;
  out->clear();
  if (!runsDirect(c.coll))
    return fail(ncclInternalError, "direct executor: %s is not a collective it runs", collName(c.coll));
  const bool leader = comm->direct->leaderRunsAll;
  if (leader && comm->rank != 0) return ncclSuccess;  // rank 0 runs this rank's share
  std::vector<char*> in, outs;
  GYRE_CHECK(buffersOf(comm, infos, c, true, &in));
  GYRE_CHECK(buffersOf(comm, infos, c, false, &outs));
  if (!leader) {
    out->push_back(shareCall(c, infos, in, outs, comm->rank, 1));
  } else if (c.coll == CollKind::ReduceScatter || c.coll == CollKind::AllGather) {
    for (int r = 0; r < comm->nranks; ++r) out->push_back(shareCall(c, infos, in, outs, r, 1));
  } else {
    out->push_back(shareCall(c, infos, in, outs, 0, comm->nranks));  // the shares are one range: the whole buffers
  }
  for (DirectCall& d : *out) d.wholeGpu = leader ? 1 : 0;
  return ncclSuccess;
}

void* startDirectCallEvent(const DeviceRequest& c, uint64_t seq, const std::vector<DirectCall>& calls,
                           bool observed) {
  if (!observed) return nullptr;
  // "Simple": plain loads and stores, no flags in the data (NCCL's nearest protocol).
  return startDeviceCallEvent(c, seq, std::max<int>(1, static_cast<int>(calls.size())), kDirectAlgo, "Simple");
}

ncclResult_t launchShares(const DeviceRequest& c, const std::vector<DirectCall>& calls, bool observed,
                          void* callEvent) {
  for (size_t i = 0; i < calls.size(); ++i) {
    LaunchEvents events;
    if (observed) {
      const int channel = static_cast<int>(i);
      events.begin(c.comm->observer, c.stream);
      events.addChannels(c.comm->observer, callEvent, &channel, 1);
    }
    const ncclResult_t launched = deviceRuntime()->launchDirect(calls[i], c.stream);
    events.launched(launched == ncclSuccess ? c.stream : nullptr);
    GYRE_CHECK(launched);
  }
  return ncclSuccess;
}

size_t capturedCallFlagWords(int nranks) { return size_t(kCapturedDirectCalls) * 2 * nranks; }

ncclResult_t enqueueCapturedCall(DeviceComm* comm, const std::vector<DirectCall>& calls, uint32_t slot,
                                 StreamHandle stream, FlagRunner runner) {
  DirectState& d = *comm->direct;
  const int n = comm->nranks, me = comm->rank;
  auto flag = [&](int owner, int phase, int peer) {
    return d.capturedFlags[owner] + (size_t(slot - 1) * 2 + phase) * n + peer;
  };
  for (int phase : {0, 1}) {
    if (phase == 1)
      for (const DirectCall& call : calls) GYRE_CHECK(deviceRuntime()->launchDirect(call, stream));
    FlagOps ops;
    ops.abort = d.abortWord;
    // The flag kernel spins on the device: it watches mapped host memory
    // and gives up after GYRE_TIMEOUT (stream memory waits between
    // processes are released by the watchdog instead).
    if (runner == FlagRunner::kKernel) {
      d.flagWatch.arm(&ops, comm->collTimeoutSeconds);
      ops.stopOnTimeout = d.abortWord;  // the share after it skips
    }
    for (int p = 0; p < n; ++p)
      if (p != me) ops.add(flag(p, phase, me), 1, FlagOpKind::kWrite);
    for (int p = 0; p < n; ++p)
      if (p != me) ops.add(flag(me, phase, p), 1, FlagOpKind::kWaitAndClear, p, capturedSignalStep(slot, phase));
    GYRE_CHECK(enqueueFlagOps(ops, stream, runner));
  }
  return ncclSuccess;
}

// Every rank sees the same table, so every rank reaches the same verdict.
ncclResult_t checkAgreement(DeviceComm* comm, const std::vector<CallInfo>& infos) {
  for (int r = 1; r < comm->nranks; ++r) {
    if (sameCall(infos[0], infos[r])) continue;
    ncclResult_t res = fail(ncclInvalidUsage, "mismatched calls: rank 0 made %s while rank %d made %s",
                            describeInfo(infos[0]).c_str(), r, describeInfo(infos[r]).c_str());
    comm->host->markFailed(res, -1);
    return res;
  }
  return ncclSuccess;
}

// Fails the communicator of `c`: some rank did not reach a meeting in time.
ncclResult_t missedMeeting(const DeviceRequest& c, ncclResult_t r, const std::string& why, bool timedOut) {
  DeviceComm* comm = c.comm;
  if (timedOut)
    r = fail(r, "%s: the ranks did not all reach this call within GYRE_TIMEOUT (%.0f s): %s", collName(c.coll),
             comm->collTimeoutSeconds, why.c_str());
  else
    r = fail(r, "%s: the ranks' meeting before this call broke (a rank that died or aborted closes its "
             "connections): %s", collName(c.coll), why.c_str());
  comm->host->markFailed(r, -1);
  return r;
}

}  // namespace gyre
