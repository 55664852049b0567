// What makes a lone host collective "the same call again": the key under
// which the calling thread keeps the last call's planned and built lanes, so
// a training loop or a benchmark that repeats one collective skips the
// planner and the schedule builders (a 1-rank 8-byte AllReduce spent about a
// third of its 0.35 us there: planContextOf, planCollective, the builders,
// making the lanes).
//
// The plan and the steps depend only on the communicator's init-time state
// (tuning table, channels, trees, mesh, single copy: none change after init)
// and on the fields below; buffer addresses enter only as the lane's two
// base pointers, which a repeat rebinds. The communicator is named by its
// serial, not its address: a destroyed communicator's memory may hold the
// next one, whose connections are different objects.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/call/call.h"

namespace gyre {

struct RepeatKey {
  uint64_t commSerial = 0;  // 0: no call cached
  CollKind coll = CollKind::AllReduce;
  size_t count = 0;
  size_t callCount = 0;
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  bool inPlace = false;
  unsigned char allowedAlgorithms = 0;
  bool algorithmsRequired = true;

  bool operator==(const RepeatKey&) const = default;
};

// Only plain collectives repeat: send/recv lanes carry a per-connection
// sequence number and order keys, PreMulSum lanes a scalar (never reused,
// see Lane::reusableFor), and a zero count builds no lane at all.
inline bool repeatable(const CollCall& c) {
  return c.coll != CollKind::SendRecv && c.count > 0 && !c.scalar.present && !c.stagedScalar;
}

inline RepeatKey repeatKeyOf(const CollCall& c, uint64_t commSerial, int rank) {
  RepeatKey k;
  k.commSerial = commSerial;
  k.coll = c.coll;
  k.count = c.count;
  k.callCount = c.callCount;
  k.datatype = c.datatype;
  k.op = c.op;
  k.root = c.root;
  k.inPlace = isInPlace(c, rank);
  k.allowedAlgorithms = c.allowedAlgorithms;
  k.algorithmsRequired = c.algorithmsRequired;
  return k;
}

}  // namespace gyre
