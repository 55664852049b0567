// From validated calls to execution. A call outside a group is a group of
// one. ncclGroupEnd turns every pending call (possibly on several
// communicators) into lanes — one per channel of a collective, one per send or
// receive — and runs them together on the host executor.
#pragma once

#include <cstddef>
#include <vector>

#include "include/gyre.h"
#include "src/comm/coll_kind.h"

namespace gyre {

// One call as the user made it (after argument checks).
struct PendingCall {
  ncclComm* comm;
  CollKind coll;
  const void* input;
  void* output;
  size_t count;          // AllGather: sendcount; ReduceScatter: recvcount; Send/Recv: count
  ncclDataType_t datatype;
  ncclRedOp_t op;
  int root;              // Broadcast/Reduce root, or the Send/Recv peer
  bool isSend;           // SendRecv only: true for ncclSend
  cudaStream_t stream = nullptr;  // device communicators: where the work is ordered
  // Staged device calls: a host copy of an ncclScalarDevice operator's scalar
  // (the device pointer cannot be read by the host executor).
  const void* stagedScalar = nullptr;
  // Staged pieces: the whole call's count, stamped into the slots instead of
  // the piece's, so a count that differs between ranks is caught at the
  // first piece rather than as a missing last one. 0: `count` is the call.
  size_t callCount = 0;
};

// Runs the call now, or queues it if a group is open on this thread.
ncclResult_t enqueue(const PendingCall& call);

ncclResult_t groupStart();
// How many ncclGroupStart calls are open on this thread.
int groupDepth();
ncclResult_t groupEnd();
// Ends the group like groupEnd but hands back its calls instead of running
// them (empty while an outer group stays open).
ncclResult_t groupSimulateEnd(std::vector<PendingCall>* calls);

}  // namespace gyre
