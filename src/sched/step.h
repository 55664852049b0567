// A schedule is what every executor runs: per channel, a flat array of
// primitive steps. Steps are plain data (no pointers, no virtual calls), so the
// same array can be copied to a GPU and walked by a kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "src/kernels/primitives/host_device.h"

namespace gyre {

enum class StepKind : uint8_t {
  Copy,                // local: dst = src (no peer)
  Send,                // send src to the send peer
  CopySend,            // dst = src; send src (a root or an all-gather's own block, out of place)
  Recv,                // dst = received
  RecvReduceSend,      // send (received op src)
  RecvReduceCopySend,  // dst = received op src; send dst
  RecvCopySend,        // dst = received; send it on
  RecvReduceCopy,      // dst = received op src (end of a reduction chain)
};

enum BufferId : uint8_t { kInputBuffer = 0, kOutputBuffer = 1 };

enum StepFlags : uint8_t {
  kStepPreOp = 1,   // apply the op's pre() to the local src elements
  kStepPostOp = 2,  // apply the op's post() to the value written/sent (reduction complete)
  // Reduce as op(local, received) instead of op(received, local): lets two
  // ranks that each reduce the same pair (exchange) apply it in one order.
  kStepLocalFirst = 4,
  // Single copy (host executor, shared memory only; build_single_copy.h):
  // a Send with kStepPeerAddr puts the address of its source elements in the
  // slot instead of the elements; the matching Recv with kStepPeerRead reads
  // that many elements from the sender's memory (process_vm_readv) into dst.
  kStepPeerAddr = 8,
  kStepPeerRead = 16,
  // The other direction: a Recv with kStepPeerWrite takes the address the
  // peer announced (its destination) and writes this step's src elements
  // there (process_vm_writev), so owner and reader both copy a share.
  kStepPeerWrite = 64,
  // A RecvReduceCopy that takes one slot from every receive connection (the
  // mesh, in rank order) and reduces all n inputs in rank order into dst:
  // one-shot AllReduce (build_direct.h). Host executor only.
  kStepAllPeers = 32,
  // On the single-copy reductions' announcements (and their receives): an
  // owner whose elements are not in a shareable allocation sends them in the
  // slot instead (the inline line says which; steps of at most 32 bytes
  // always ride in the line), so the readers copy from the FIFO rather than
  // through process_vm_readv. Host executor only.
  kStepByValueIfPrivate = 128,
};

struct Step {
  StepKind kind;
  uint8_t srcBuffer;  // BufferId of the local source
  uint8_t dstBuffer;  // BufferId of the local destination
  uint8_t flags;      // StepFlags
  uint8_t sendConn;   // index into the channel's send connections
  uint8_t recvConn;   // index into the channel's receive connections
  uint16_t reserved;
  uint32_t count;     // elements moved by this step; always fits one FIFO slot
  uint64_t srcOffset; // elements from the start of srcBuffer
  uint64_t dstOffset; // elements from the start of dstBuffer
};
static_assert(sizeof(Step) == 32);

GYRE_HOST_DEVICE bool stepReceives(StepKind k) {
  return k != StepKind::Copy && k != StepKind::Send && k != StepKind::CopySend;
}
GYRE_HOST_DEVICE bool stepSends(StepKind k) {
  return k == StepKind::Send || k == StepKind::CopySend || k == StepKind::RecvReduceSend || k == StepKind::RecvReduceCopySend ||
         k == StepKind::RecvCopySend;
}

// Peers of one channel, indexed by Step::sendConn / Step::recvConn.
struct ChannelPeers {
  std::vector<int> sendPeers;
  std::vector<int> recvPeers;
};

struct ChannelSchedule {
  std::vector<Step> steps;
};

}  // namespace gyre
