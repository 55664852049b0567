// Single-copy schedules: a rank tells each reader where its elements are
// (a Send flagged kStepPeerAddr, one cache line), each reader copies them
// straight from the owner's buffer into its own (a Recv flagged
// kStepPeerRead: process_vm_readv), and the owner returns only after every
// reader acknowledged (an empty step back), so nobody reads a buffer whose
// call has ended. One copy of the data instead of two through a FIFO slot,
// which is what bounds Broadcast and AllGather at large sizes.
//
// Connections as in build_direct.h (peer p at meshIndex(rank, p)): the mesh,
// or on two ranks the ring pair, whose one connection each way is the peer.
#pragma once

#include "src/sched/build_direct.h"

namespace gyre {

// A read step covers one FIFO's worth (NCCL_BUFFSIZE: this many pipeline
// steps): SlotMeta's byte count is 32 bits, and pieces let the owner's own
// copy (out of place) overlap the readers.
constexpr size_t kSingleCopyStepsPerPiece = 8;
// A reduction's piece is one FIFO slot: its result is read by the peers
// right after it is made, while it is still in the reducer's cache.
constexpr size_t kSingleCopyReduceStepsPerPiece = 1;

// The root announces its input; the others read it; the root copies its own
// output (out of place) while they do, then waits for their acknowledgements.
// On 2 ranks each piece is split so both cores copy: the reader announces
// where the piece's last third goes in its output and reads the rest, the
// root writes that third there (kStepPeerWrite), and the root acknowledges
// too, so the reader returns only after the root's writes.
void buildSingleCopyBroadcast(const DirectShape& shape, ChannelSchedule* out);
// Every rank announces its block and reads every other rank's into output
// block p, then acknowledges to each and waits for each acknowledgement.
void buildSingleCopyAllGather(const DirectShape& shape, ChannelSchedule* out);
// Each rank announces input block p to rank p, piece by piece, and reduces
// its own block from every rank's input where it lies (kStepAllPeers with
// kStepPeerRead: by reference), in rank order; then the acknowledgements.
// One read of each peer's input instead of a copy into a FIFO slot and a
// read out of it.
void buildSingleCopyReduceScatter(const DirectShape& shape, ChannelSchedule* out);
// ReduceScatter over the blocks of splitSegment(count, nranks), then each
// rank announces each reduced piece of its block and reads the peers'
// pieces (the AllGather by reference), round by round so a result is read
// while it is still in the reducer's cache. shape.count is the message.
void buildSingleCopyAllReduce(const DirectShape& shape, size_t alignElems, ChannelSchedule* out);

}  // namespace gyre
