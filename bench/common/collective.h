// What a *_perf binary tells the shared driver about its collective: how
// message sizes map to buffer counts, the bus-bandwidth factor, how to call
// it, and what each rank should receive under the data check. Each binary is
// one such description plus `return benchMain(argc, argv, kMyCollective);`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "check.h"
#include "gyre.h"

namespace gyre_bench {

// Element counts for one message size on one rank. In-place runs use a single
// buffer of max(send, recv) elements, with the send and receive regions at the
// given element offsets inside it (AllGather: send at rank*sendCount).
struct CollCounts {
  size_t sendCount = 0;
  size_t recvCount = 0;
  size_t paramCount = 0;  // the count argument of the call, printed as "count"
  size_t inplaceSendOffset = 0;
  size_t inplaceRecvOffset = 0;
};

struct Collective {
  const char* program;  // "all_reduce_perf"
  const char* name;     // "AllReduce", in log and error lines
  bool usesOp;
  bool usesRoot;
  // `count` is the message size in elements (bytes / type size, rounded down),
  // `typeBytes` the element size (AlltoAll aligns its blocks in bytes).
  CollCounts (*counts)(size_t count, size_t typeBytes, int nranks, int rank);
  // busbw = algbw * busBwFactor(nranks); algbw = max(send, recv) bytes / time.
  double (*busBwFactor)(int nranks);
  ncclResult_t (*run)(const void* send, void* recv, const CollCounts& counts,
                      ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
  // Value this rank must find at receive element i after the call; inputs are
  // CheckPattern::input(rank, i) over each rank's sendCount elements.
  int64_t (*expected)(const CheckPattern& p, const CollCounts& counts, size_t i, int rank,
                      int nranks, int root);
  // Receive elements that hold a defined result on this rank (Reduce: only
  // the root's); the check compares the first this-many elements.
  size_t (*checkedCount)(const CollCounts& counts, int rank, int root);
  // False where nccl-tests times the in-place mode but does not check it,
  // because the operation has no in-place form (SendRecv, AlltoAll with the
  // send and receive buffers being one): that column's #wrong is N/A.
  bool checkInPlace = true;
};

// Parses the command line, starts the ranks and runs the table. Returns the
// process exit code (non-zero on a usage error, a library error or a wrong
// result).
int benchMain(int argc, char** argv, const Collective& coll);

}  // namespace gyre_bench
