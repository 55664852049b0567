#include "src/device/direct_share.h"

#include <stdio.h>

#include <algorithm>

#include "src/bootstrap/bootstrap.h"
#include "src/call/datatypes.h"
#include "src/debug/error.h"
#include "src/device/call_scalar.h"
#include "src/device/direct_calls.h"

namespace gyre {
namespace {

constexpr size_t kMaxMappings = 128;  // peer blocks kept mapped; past this, calls stage

bool sameCall(const CallInfo& a, const CallInfo& b) {
  bool customA = a.redop >= ncclNumOps, customB = b.redop >= ncclNumOps;
  return a.callSeq == b.callSeq && a.count == b.count && a.coll == b.coll && a.datatype == b.datatype &&
         a.root == b.root && (customA ? customB : a.redop == b.redop);
}

// Which of a rank's buffers its peers read or write.
bool inputShared(const DeviceRequest& c, int rank) {
  switch (c.coll) {
    case CollKind::AllReduce: case CollKind::Reduce: case CollKind::ReduceScatter: return true;
    case CollKind::Broadcast: return rank == c.root;
    default: return false;
  }
}
bool outputShared(const DeviceRequest& c, int rank) {
  switch (c.coll) {
    case CollKind::AllReduce: case CollKind::Broadcast: case CollKind::AllGather: return true;
    case CollKind::Reduce: return rank == c.root;
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
      void* p = nullptr;
      GYRE_CHECK(peerPointer(comm, r, input ? infos[r].input : infos[r].output,
                             input ? infos[r].inputOffset : infos[r].outputOffset, &p));
      (*out)[r] = static_cast<char*>(p);
    }
  }
  return ncclSuccess;
}

// This rank's share of [0, count): split in 16-byte units so shares of
// aligned buffers stay aligned.
void shareOf(size_t count, size_t elementSize, int rank, int nranks, size_t* first, size_t* n) {
  size_t unit = std::max<size_t>(1, 16 / elementSize);
  size_t units = (count + unit - 1) / unit;
  size_t lo = units * rank / nranks * unit, hi = units * (rank + 1) / nranks * unit;
  *first = std::min(lo, count);
  *n = std::min(hi, count) - *first;
}

}  // namespace

std::string describeInfo(const CallInfo& i) {
  char text[160];
  snprintf(text, sizeof(text), "%s #%llu (count %llu, datatype %d, op %d, root %d)",
           collName(static_cast<CollKind>(i.coll)), static_cast<unsigned long long>(i.callSeq),
           static_cast<unsigned long long>(i.count), i.datatype, i.redop, i.root);
  return text;
}

size_t inputBytes(const DeviceRequest& c) {
  return c.count * datatypeSize(c.datatype) * inputBlocks(c.coll, c.comm->nranks);
}
size_t outputBytes(const DeviceRequest& c) {
  return c.count * datatypeSize(c.datatype) * outputBlocks(c.coll, c.comm->nranks);
}

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
  bool ok = !capturing && comm->direct->heldBlocks.size() < kMaxMappings;
  if (comm->direct->clique) {
    info.usable = ok ? 1 : 0;  // addresses of this process: nothing to map
    return info;
  }
  if (ok && inputShared(c, comm->rank))
    ok = describeOwnAllocation(c.input, inputBytes(c), &info.input, &info.inputOffset);
  if (ok && outputShared(c, comm->rank))
    ok = describeOwnAllocation(c.output, outputBytes(c), &info.output, &info.outputOffset);
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

ncclResult_t buildDirectCall(const DeviceRequest& c, const std::vector<CallInfo>& infos, DirectCall* out) {
  DeviceComm* comm = c.comm;
  const int n = comm->nranks, me = comm->rank;
  const size_t es = datatypeSize(c.datatype);
  std::vector<char*> in, outs;
  GYRE_CHECK(buffersOf(comm, infos, c, true, &in));
  GYRE_CHECK(buffersOf(comm, infos, c, false, &outs));
  DirectCall d;
  d.datatype = static_cast<uint8_t>(c.datatype);
  d.redop = static_cast<uint8_t>(c.op);
  d.nranks = n;
  d.abort = comm->direct->abortWord;
  d.maxBlocks = comm->direct->maxBlocks;
  setCallScalar(c, &d);
  size_t first = 0, count = 0;
  switch (c.coll) {
    case CollKind::AllReduce: case CollKind::Reduce: case CollKind::Broadcast: {
      shareOf(c.count, es, me, n, &first, &count);
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
      for (int r = 0; r < n; ++r) d.src[d.nsrc++] = in[r] + me * count * es;
      d.dst[d.ndst++] = outs[me];
      d.reduce = 1;
      break;
    case CollKind::AllGather:
      count = c.count;
      d.src[d.nsrc++] = in[me];
      for (int r = 0; r < n; ++r) d.dst[d.ndst++] = outs[r] + me * count * es;
      break;
    default:
      return fail(ncclInternalError, "direct executor: %s is not a collective it runs", collName(c.coll));
  }
  d.count = count;
  *out = d;
  return ncclSuccess;
}

// Every rank sees the same table, so every rank reaches the same verdict.
ncclResult_t checkAgreement(DeviceComm* comm, const std::vector<CallInfo>& infos) {
  for (int r = 1; r < comm->nranks; ++r) {
    if (sameCall(infos[0], infos[r])) continue;
    ncclResult_t res = fail(ncclInvalidUsage, "mismatched calls: rank 0 made %s while rank %d made %s",
                            describeInfo(infos[0]).c_str(), r, describeInfo(infos[r]).c_str());
    comm->hooks->markFailed(res, -1);
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
  comm->hooks->markFailed(r, -1);
  return r;
}

}  // namespace gyre
