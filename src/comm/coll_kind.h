// The collectives gyre knows, with the names used in messages.
#pragma once

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
