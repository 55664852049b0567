// One collective or point-to-point call as a value: what the user asked for,
// with everything a lower layer needs resolved (a PreMulSum operator's
// scalar), and no reference to the communicator. The communicator passes it
// down to the planner, the schedule builders and the executors.
#pragma once

#include <cstddef>

#include "include/gyre.h"
#include "src/call/coll_kind.h"
#include "src/call/datatypes.h"

namespace gyre {

// A PreMulSum operator's scalar (ncclRedOpCreatePreMulSum), looked up when
// the call is made: its value as bytes of the call's datatype
// (ncclScalarHostImmediate), or the device pointer a kernel reads when it
// starts (ncclScalarDevice; never read on the host).
struct CallScalar {
  bool present = false;
  const void* devicePtr = nullptr;
  unsigned char value[8] = {};
};

struct CollCall {
  CollKind coll = CollKind::AllReduce;
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;      // AllGather: sendcount; ReduceScatter: recvcount; Send/Recv: count
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;          // Broadcast/Reduce root, or the Send/Recv peer
  bool isSend = false;   // SendRecv only: true for ncclSend
  cudaStream_t stream = nullptr;  // device communicators: where the work is ordered
  CallScalar scalar;
  // Staged device calls: a host copy of an ncclScalarDevice operator's scalar
  // (the device pointer cannot be read by the host executor).
  const void* stagedScalar = nullptr;
  // Staged pieces: the whole call's count, stamped into the slots instead of
  // the piece's, so a count that differs between ranks is caught at the
  // first piece rather than as a missing last one. 0: `count` is the call.
  size_t callCount = 0;
  // A per-call config's algSelection (ncclCollConfig_t): a bit per Algorithm
  // (1 << int(Algorithm)) the call may use, 0 for the tuning table's choice;
  // `algorithmsRequired` (forceAlgSelection): a selection that cannot run
  // here is an error rather than left to the table.
  unsigned char allowedAlgorithms = 0;
  bool algorithmsRequired = true;
};

// A call's arguments as the API received them (no scalar yet: enqueue()
// resolves it from the communicator).
inline CollCall makeCall(CollKind coll, const void* input, void* output, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, bool isSend, cudaStream_t stream) {
  CollCall c;
  c.coll = coll;
  c.input = input;
  c.output = output;
  c.count = count;
  c.datatype = datatype;
  c.op = op;
  c.root = root;
  c.isSend = isSend;
  c.stream = stream;
  return c;
}

// Whether the call's output is its input (AllGather: the rank's own block of
// the output, `rank` being the caller's).
inline bool isInPlace(const CollCall& c, int rank) {
  if (c.coll != CollKind::AllGather) return c.input == c.output;
  size_t bytes = c.count * datatypeSize(c.datatype);
  return static_cast<const char*>(c.input) == static_cast<char*>(c.output) + rank * bytes;
}

}  // namespace gyre
