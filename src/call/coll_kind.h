// The collectives gyre knows, with the names used in messages.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gyre {

enum class CollKind : uint8_t {
  AllReduce = 0,
  Broadcast = 1,
  Reduce = 2,
  AllGather = 3,
  ReduceScatter = 4,
  SendRecv = 5,
};

// How many count-sized blocks a rank's input and output hold: one per rank
// for ReduceScatter's input and AllGather's output, else one.
inline size_t inputBlocks(CollKind k, int nranks) { return k == CollKind::ReduceScatter ? size_t(nranks) : 1; }
inline size_t outputBlocks(CollKind k, int nranks) { return k == CollKind::AllGather ? size_t(nranks) : 1; }

// The root a rooted collective's steps carry in their SlotMeta, so that
// ranks passing different roots are found by the call itself; -1 for the
// others (a Send/Recv's "root" is its peer, which differs by rank).
inline int32_t metaRootOf(CollKind k, int root) {
  return k == CollKind::Broadcast || k == CollKind::Reduce ? root : -1;
}

inline const char* collName(CollKind k) {
  switch (k) {
    case CollKind::AllReduce: return "ncclAllReduce";
    case CollKind::Broadcast: return "ncclBroadcast";
    case CollKind::Reduce: return "ncclReduce";
    case CollKind::AllGather: return "ncclAllGather";
    case CollKind::ReduceScatter: return "ncclReduceScatter";
    case CollKind::SendRecv: return "ncclSend/Recv";
  }
  return "collective";
}

}  // namespace gyre
