// What one collective kernel launch gets: plain structs that both the CUDA
// kernel (src/kernels/collective_kernel.cu) and its host emulation
// (tests/support/fake_cuda/host_emulation.cc, in the tests' fake CUDA
// runtime) read. A launch runs one block per lane; a lane is a schedule
// (src/sched) over device FIFOs.
//
// The lanes of a call (steps and connections) depend only on the call's shape,
// so they live in device memory cached per communicator (src/device/
// kernel_calls.cc); what changes per call (buffers, sequence number, scalar)
// travels by value in DeviceCall. A launch (DeviceLaunch) carries up to
// kMaxFusedCalls calls of a group, and says which lanes each block runs.
#pragma once

#include <cstdint>

#include "src/sched/step.h"
#include "src/transport/fifo.h"

namespace gyre {

// Connections one lane may use in each direction (a tree node's children, a
// ring's one neighbour).
constexpr int kMaxLaneConns = 8;

struct DeviceLane {
  const Step* steps;  // device memory
  uint32_t nsteps;
  int32_t channel;    // for error reports
  uint8_t nsend, nrecv;
  int32_t sendPeer[kMaxLaneConns];
  int32_t recvPeer[kMaxLaneConns];
  Fifo send[kMaxLaneConns];  // producer side: this rank advances tail
  Fifo recv[kMaxLaneConns];  // consumer side: this rank advances head
};

// Why a lane stopped early (DeviceStatus::error).
enum DeviceErrorKind : int32_t {
  kDeviceOk = 0,
  kDeviceAborted = 1,   // ncclCommAbort set the abort word
  kDeviceTimeout = 2,   // a peer did not move within the timeout
  kDeviceMismatch = 3,  // a peer's SlotMeta disagrees with this call
  kDevicePeerGone = 4,  // the lane waited on a peer whose process closed its connections
};

// Page-locked host memory mapped into the device: the host sets `abort`,
// the first failing lane fills in the rest (CAS on `error`).
struct DeviceStatus {
  volatile uint32_t abort;
  int32_t deadPeer;    // rank + 1 of the rank a peer's abort notice blames (the abort's reason), else 0
  int32_t noticeFrom;  // rank + 1 of the peer that sent the notice
  int32_t error;     // DeviceErrorKind, set once the fields below are written
  int32_t reporter;  // the DeviceErrorKind of the lane that claimed the report (it writes the fields, then error)
  int32_t peer;
  int32_t channel;
  uint64_t opCount;
  uint32_t step;
  uint32_t waitingForData;  // 1: data from the peer, 0: buffer space at the peer
  uint64_t count;           // the failing call, as this rank made it
  uint8_t coll, datatype, redop, pad;
  int32_t root;             // metaRootOf the failing call
  SlotMeta seen;            // kDeviceMismatch: what the peer sent
};

struct DeviceCall {
  const DeviceLane* lanes;  // device memory, nlanes entries
  int32_t nlanes;
  uint8_t coll, datatype, redop;  // CollKind, ncclDataType_t, ncclRedOp_t (custom ops: the value)
  uint8_t metaRedop;              // what SlotMeta carries (0xff for custom ops)
  uint8_t ll;                     // 1: the LL protocol (flags in the data), 0: Simple
  void* buffers[2];               // kInputBuffer, kOutputBuffer
  uint64_t count;                 // the call's count, stamped into SlotMeta
  uint64_t opCount;
  int32_t root;                   // metaRootOf(coll, root), stamped into SlotMeta
  int32_t nranks;
  int32_t hasScalar;              // PreMulSum: scalar below, or read from scalarPtr
  unsigned char scalar[8];
  const void* scalarPtr;          // device memory (ncclScalarDevice), or null
  DeviceStatus* status;           // device view of the communicator's status
  // Per rank, set by the watchdog when its process closed its connections: a
  // lane waiting on such a peer stops. A peer that left after its part of
  // the call is no error (its data is already in this rank's memory).
  const volatile uint32_t* peerGone;
  uint64_t timeoutNs;             // a wait longer than this fails the lane
};

// Calls one launch may carry: consecutive collectives of a group on one
// communicator and stream, with one datatype and operator (so one kernel
// instantiation serves them all). 8 DeviceCalls keep the launch's
// parameters near 1 KiB, well inside CUDA's 4 KiB.
constexpr int kMaxFusedCalls = 8;

// Lane `lane` of the launch's call `call`.
struct LaneRef {
  uint16_t call;
  uint16_t lane;
};

struct DeviceLaunch {
  DeviceCall calls[kMaxFusedCalls];
  int32_t ncalls;
  int32_t nblocks;
  // Block b runs items[blockFirst[b] .. blockFirst[b+1]) in order (device
  // memory, src/device/kernel/fused_blocks.h). Null for a launch of one call:
  // block b runs its lane b.
  const uint32_t* blockFirst;
  const LaneRef* items;
};

}  // namespace gyre
