// A lane is one ordered list of steps over its own connections: one channel
// of a collective, one direction of a tree, or all sends to (or receives
// from) one peer in a group. LaneSpec describes one as plain values — the
// call it belongs to, its steps, its connections and buffers — and both
// executors run it: the host executor as a TypedLane (src/host/lane.h), the
// device executor uploaded as a DeviceLane (src/kernels/device_work.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "include/gyre.h"
#include "src/call/coll_kind.h"
#include "src/sched/step.h"

namespace gyre {

struct Connection;  // src/transport/transport.h

struct LaneSpec {
  int rank = 0;             // this rank, for messages
  int nranks = 1;           // ncclAvg divides by it
  CollKind coll = CollKind::AllReduce;
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  size_t count = 0;         // the call's count, stamped into SlotMeta for peer checks
  uint64_t opCount = 0;     // the call's sequence number (per connection for send/recv)
  int32_t root = -1;        // metaRootOf(coll, the call's root), stamped into SlotMeta
  int channel = 0;
  // Host lanes: copies into the output use streaming stores (a large call,
  // whose output would not stay in the caches; streaming_copy.h).
  bool streamingStores = false;
  const Step* steps = nullptr;
  size_t nsteps = 0;
  Connection* const* send = nullptr;  // indexed by Step::sendConn
  Connection* const* recv = nullptr;  // indexed by Step::recvConn
  size_t nsend = 0;
  size_t nrecv = 0;
  void* buffers[2] = {nullptr, nullptr};  // kInputBuffer, kOutputBuffer
  // A send/recv lane has one connection: set this instead of send/recv and
  // the lane points its one-entry array at its own copy.
  Connection* single = nullptr;
  // A PreMulSum operator's scalar, as bytes of `datatype`.
  bool hasScalar = false;
  unsigned char scalar[8] = {};
};

}  // namespace gyre
