// Queue pairs and the data path of an IB connection (protocol: ib_comm.h).
#pragma once

#include "include/gyre.h"
#include "src/transport/ib/ib_comm.h"

namespace gyre::ib {

// A CQ and NCCL_IB_QPS_PER_CONNECTION RC QPs in INIT; fills c->mine.
ncclResult_t createQps(IbComm* c);
// Moves every QP to RTR then RTS towards c->theirs, with NCCL_IB_TIMEOUT,
// NCCL_IB_RETRY_CNT, NCCL_IB_SL, NCCL_IB_TC (and a GRH on RoCE ports).
ncclResult_t connectQps(IbComm* c);
// Receiver: a receive on every QP for each FIFO slot.
ncclResult_t postReceives(IbComm* c);

ncclResult_t ibIsend(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
// Receiver: RDMA-writes its FIFO entry `slot` into the sender's FIFO (on
// the first QP; the completion is one drainCq ignores).
ncclResult_t writeFifoEntry(IbComm* c, int slot);
ncclResult_t ibIrecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
ncclResult_t ibTest(void* request, int* done, int* size);

}  // namespace gyre::ib
