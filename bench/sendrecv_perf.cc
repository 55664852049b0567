// sendrecv_perf: nccl-tests' SendRecv benchmark on gyre host communicators:
// in one group, each rank sends to rank+1 and receives from rank-1 (a ring
// shift), so every link carries one message in each direction at once.
//   sendrecv_perf -p 4 -b 8 -e 64M -f 4 -c 1
#include "common/collective.h"

namespace {

using gyre_bench::CheckPattern;
using gyre_bench::CollCounts;

CollCounts sendRecvCounts(size_t count, size_t, int, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;
}

double sendRecvBusBw(int) { return 1.0; }

ncclResult_t sendRecvRun(const void* send, void* recv, const CollCounts& c,
                         ncclDataType_t type, ncclRedOp_t, int, ncclComm_t comm,
    cudaStream_t stream) {
  int rank = 0, nranks = 1;
  ncclResult_t r = ncclCommUserRank(comm, &rank);
  if (r == ncclSuccess) r = ncclCommCount(comm, &nranks);
  if (r != ncclSuccess) return r;
  if ((r = ncclGroupStart()) != ncclSuccess) return r;
  ncclResult_t s = ncclSend(send, c.paramCount, type, (rank + 1) % nranks, comm, stream);
  if (s == ncclSuccess)
    s = ncclRecv(recv, c.paramCount, type, (rank - 1 + nranks) % nranks, comm, stream);
  r = ncclGroupEnd();  // always closes the group, also after a failed call
  return s != ncclSuccess ? s : r;
}

int64_t sendRecvExpected(const CheckPattern& p, const CollCounts&, size_t i, int rank,
                         int nranks, int) {
  return p.input((rank - 1 + nranks) % nranks, i);
}

size_t sendRecvChecked(const CollCounts& c, int, int) { return c.recvCount; }

// In place, a rank would send from the buffer it receives into; nccl-tests
// times that mode but does not check it.
constexpr gyre_bench::Collective kSendRecv = {
    "sendrecv_perf", "SendRecv",    /*usesOp=*/false, /*usesRoot=*/false,
    sendRecvCounts,  sendRecvBusBw, sendRecvRun,      sendRecvExpected,
    sendRecvChecked, /*checkInPlace=*/false};

}  // namespace

int main(int argc, char** argv) { return gyre_bench::benchMain(argc, argv, kSendRecv); }
