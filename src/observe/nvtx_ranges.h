// NVTX ranges for tools such as Nsight Systems: one per API call, named as
// NCCL names them ("ncclAllReduce", ...), in the domain "NCCL", with a
// payload (NVTX's payload extension, a registered static schema) of the
// communicator id, rank, rank count, count, bytes, datatype, operator and
// root or peer; and one range "ncclGroup" from the outermost
// ncclGroupStart to its ncclGroupEnd. Built when the CUDA toolkit's
// header-only NVTX3 is found (GYRE_HAVE_NVTX); NCCL_NVTX_DISABLE=1 turns it
// off. With no tool attached NVTX's calls return at once (its function
// pointers stay at no-ops).
#pragma once

#include <atomic>
#include <cstdint>

#include "src/call/call.h"
#include "src/observe/call_counters.h"

namespace gyre::nvtx {

// Whether ranges are emitted: built in, not disabled, and a tool attached
// to NVTX (with none, NVTX's own calls would do nothing, but building the
// payload would still cost each call). Decided at the first call: NVTX
// loads its tool only when first used, so none can attach later.
bool decideEnabled();
// 0: not decided yet, 1: on, 2: off. Atomic: every thread that makes a call
// reads it, and the first ones may decide at once.
extern std::atomic<int> enabledState;
inline bool enabled() {
  const int state = enabledState.load(std::memory_order_relaxed);
  return state == 1 || (state == 0 && decideEnabled());
}

void pushCall(ApiFunc func, const CollCall& call, uint64_t commId, int rank, int nranks);
void pushGroup();
void pop();

// What pushCall attaches, as laid out in the payload (the schema's entries
// name these fields; tests/observe reads them back through an injection).
struct CallPayload {
  uint64_t comm;
  int32_t rank;
  int32_t nranks;
  uint64_t count;
  uint64_t bytes;
  const char* datatype;  // "float32", ...
  const char* op;        // "sum", ..., "custom" (PreMulSum); "" where the call has none
  int32_t root;          // Broadcast/Reduce root, Send/Recv peer, else -1
};

}  // namespace gyre::nvtx
