#include "src/transport/ib/ib_qp.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/transport/ib/ib_async.h"
#include "src/transport/ib/ib_records.h"
#include "src/transport/ib/reg_cache.h"
#include "src/transport/ib/verbs_api.h"

namespace gyre::ib {
namespace {

constexpr int kSendDepth = 2 * kIbSlots + 8;  // message pieces + FIFO writes in flight per QP

ncclResult_t verbsFail(IbComm* c, const char* call, int err) {
  return fail(ncclSystemError, "NET/IB %s: %s failed: %s", c->what.c_str(), call, strerror(err ? err : EIO));
}

int64_t setting(const char* name) {
  int64_t v = 0;
  (void)env::getInt(name, &v);  // validated at init (validateAll)
  return v;
}

ncclResult_t postRecv(IbComm* c, ibv_qp* qp) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = 0;  // WRITE_WITH_IMM consumes it without data; matched by order
  int rc = ibPostRecv(qp, &wr, &bad);
  return rc ? verbsFail(c, "ibv_post_recv", rc) : ncclSuccess;
}

}  // namespace

ncclResult_t createQps(IbComm* c) {
  const VerbsApi* v = verbs(nullptr);
  const int nqps = static_cast<int>(std::min<int64_t>(setting("NCCL_IB_QPS_PER_CONNECTION"), kIbMaxQps));
  c->cq = v->createCq(c->port->ctx, (kSendDepth + kIbSlots) * nqps, nullptr, nullptr, 0);
  if (!c->cq) return verbsFail(c, "ibv_create_cq", errno);
  c->mine.magic = kRecordMagic;
  c->mine.nqps = static_cast<uint32_t>(nqps);
  c->mine.lid = c->port->lid;
  c->mine.linkLayer = c->port->linkLayer;
  c->mine.mtu = static_cast<uint8_t>(c->port->mtu);
  c->mine.gid = c->port->gid;
  for (int i = 0; i < nqps; ++i) {
    ibv_qp_init_attr init{};
    init.send_cq = c->cq;
    init.recv_cq = c->cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = kSendDepth;
    init.cap.max_recv_wr = kIbSlots;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    ibv_qp* qp = v->createQp(c->port->pd, &init);
    if (!qp) return verbsFail(c, "ibv_create_qp", errno);
    c->qps.push_back(qp);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = static_cast<uint8_t>(c->port->port);
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    int rc = v->modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc) return verbsFail(c, "ibv_modify_qp(INIT)", rc);
    c->mine.qpn[i] = qp->qp_num;
  }
  c->qpDone.assign(static_cast<size_t>(nqps), 0);
  return ncclSuccess;
}

ncclResult_t connectQps(IbComm* c) {
  const VerbsApi* v = verbs(nullptr);
  for (size_t i = 0; i < c->qps.size(); ++i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min(c->mine.mtu, c->theirs.mtu));
    a.dest_qp_num = c->theirs.qpn[i];
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = static_cast<uint8_t>(c->port->port);
    a.ah_attr.sl = static_cast<uint8_t>(setting("NCCL_IB_SL"));
    if (c->port->linkLayer == IBV_LINK_LAYER_ETHERNET) {  // RoCE: routed by GID
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.dgid = c->theirs.gid;
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(c->port->gidIndex);
      a.ah_attr.grh.hop_limit = 255;
      a.ah_attr.grh.traffic_class = static_cast<uint8_t>(setting("NCCL_IB_TC"));
    } else {
      a.ah_attr.dlid = c->theirs.lid;
    }
    int rc = v->modifyQp(c->qps[i], &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc) return verbsFail(c, "ibv_modify_qp(RTR)", rc);
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = static_cast<uint8_t>(setting("NCCL_IB_TIMEOUT"));
    s.retry_cnt = static_cast<uint8_t>(setting("NCCL_IB_RETRY_CNT"));
    s.rnr_retry = 7;
    s.sq_psn = 0;
    s.max_rd_atomic = 1;
    rc = v->modifyQp(c->qps[i], &s,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc) return verbsFail(c, "ibv_modify_qp(RTS)", rc);
  }
  return ncclSuccess;
}

ncclResult_t postReceives(IbComm* c) {
  for (ibv_qp* qp : c->qps)
    for (int k = 0; k < kIbSlots; ++k) GYRE_CHECK(postRecv(c, qp));
  return ncclSuccess;
}

// The error a call on `c` returns once its device reported a fatal event
// (ncclSystemError: this rank's own hardware) or a completion failed
// (ncclRemoteError); ncclSuccess while neither happened.
static ncclResult_t commFailure(IbComm* c) {
  const std::string async = asyncFailure(c);
  if (!async.empty()) return fail(ncclSystemError, "%s", async.c_str());
  if (!c->error.empty()) return fail(ncclRemoteError, "%s", c->error.c_str());
  return ncclSuccess;
}

ncclResult_t ibIsend(void* sendComm, void* data, int size, int, void* mhandle, void** request) {
  auto* c = static_cast<IbComm*>(sendComm);
  *request = nullptr;
  GYRE_CHECK(commFailure(c));
  const int slot = static_cast<int>(c->index % kIbSlots);
  FifoEntry& e = c->fifo[slot];
  const uint64_t seq = __atomic_load_n(&e.seq, __ATOMIC_ACQUIRE);
  if (seq != c->index + 1) {
    // Not posted yet: the slot still holds the receive kIbSlots before (or
    // nothing). The receiver reuses a slot only once this side's write into
    // it has completed there, so any other value is no receive this send
    // can match; waiting for one would last until GYRE_TIMEOUT.
    const uint64_t previous = c->index >= kIbSlots ? c->index + 1 - kIbSlots : 0;
    if (seq == previous) return ncclSuccess;
    return fail(ncclRemoteError, "NET/IB %s: the receiver announced receive #%llu in the FIFO slot of receive #%llu "
                "(receives posted out of order, or more than the FIFO's %d at once)", c->what.c_str(),
                static_cast<unsigned long long>(seq), static_cast<unsigned long long>(c->index + 1), kIbSlots);
  }
  if (static_cast<uint32_t>(size) > e.size)
    return fail(ncclInvalidUsage, "NET/IB %s: a %d-byte message for a %u-byte receive buffer", c->what.c_str(), size,
                e.size);
  IbRequest& r = c->reqs[slot];
  if (r.used) return fail(ncclInternalError, "NET/IB %s: more than %d sends in flight", c->what.c_str(), kIbSlots);
  auto* m = static_cast<IbMr*>(mhandle);
  // One piece per QP, cut on 128-byte boundaries; trailing pieces may be empty.
  const size_t nqps = c->qps.size();
  size_t per = (static_cast<size_t>(size) + nqps - 1) / nqps;
  per = (per + 127) / 128 * 128;
  for (size_t q = 0; q < nqps; ++q) {
    const size_t off = std::min(q * per, static_cast<size_t>(size));
    const size_t len = std::min(off + per, static_cast<size_t>(size)) - off;
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(data) + off;
    sge.length = static_cast<uint32_t>(len);
    sge.lkey = m->mr->lkey;
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = c->index;
    wr.sg_list = len ? &sge : nullptr;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(static_cast<uint32_t>(size));
    wr.wr.rdma.remote_addr = e.addr + off;
    wr.wr.rdma.rkey = e.rkey;
    int rc = ibPostSend(c->qps[q], &wr, &bad);
    if (rc) return verbsFail(c, "ibv_post_send", rc);
  }
  r = IbRequest{c, true, static_cast<int>(nqps), size};
  ++c->index;
  *request = &r;
  return ncclSuccess;
}

ncclResult_t writeFifoEntry(IbComm* c, int slot) {
  const FifoEntry& e = c->fifo[slot];
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(&e);
  sge.length = sizeof(e);
  sge.lkey = c->fifoMr->lkey;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kFifoWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = c->theirs.fifoAddr + static_cast<uint64_t>(slot) * sizeof(FifoEntry);
  wr.wr.rdma.rkey = c->theirs.fifoRkey;
  int rc = ibPostSend(c->qps[0], &wr, &bad);
  if (rc) return verbsFail(c, "ibv_post_send", rc);
  return ncclSuccess;
}

ncclResult_t ibIrecv(void* recvComm, int n, void** data, int* sizes, int*, void** mhandles, void** request) {
  auto* c = static_cast<IbComm*>(recvComm);
  *request = nullptr;
  if (n != 1) return fail(ncclInvalidUsage, "NET/IB %s: grouped receives (%d) are not supported", c->what.c_str(), n);
  GYRE_CHECK(commFailure(c));
  const int slot = static_cast<int>(c->index % kIbSlots);
  IbRequest& r = c->reqs[slot];
  if (r.used) return ncclSuccess;  // every slot is posted: try again later
  auto* m = static_cast<IbMr*>(mhandles[0]);
  FifoEntry& e = c->fifo[slot];
  e.addr = reinterpret_cast<uintptr_t>(data[0]);
  e.rkey = m->mr->rkey;
  e.size = static_cast<uint32_t>(sizes[0]);
  e.seq = c->index + 1;
  GYRE_CHECK(writeFifoEntry(c, slot));
  r = IbRequest{c, true, static_cast<int>(c->qps.size()), 0};
  ++c->index;
  *request = &r;
  return ncclSuccess;
}

// Takes every completion the CQ holds; the first error is kept in c->error.
ncclResult_t drainCq(IbComm* c) {
  ibv_wc wcs[16];
  for (;;) {
    int n = ibPollCq(c->cq, 16, wcs);
    if (n < 0) return verbsFail(c, "ibv_poll_cq", EIO);
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.status != IBV_WC_SUCCESS) {
        if (c->error.empty())
          c->error = "NET/IB " + c->what + ": completion error on QP " + std::to_string(wc.qp_num) + ": " +
                     wcStatusText(wc.status);
        continue;
      }
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        size_t q = 0;
        while (q < c->qps.size() && c->qps[q]->qp_num != wc.qp_num) ++q;
        if (q == c->qps.size()) continue;
        IbRequest& r = c->reqs[c->qpDone[q]++ % kIbSlots];
        r.size = static_cast<int>(ntohl(wc.imm_data));
        --r.pending;
        GYRE_CHECK(postRecv(c, c->qps[q]));
      } else if (wc.wr_id != kFifoWrId) {
        --c->reqs[wc.wr_id % kIbSlots].pending;
      }
    }
    if (n < 16) return ncclSuccess;
  }
}

ncclResult_t ibTest(void* request, int* done, int* size) {
  auto* r = static_cast<IbRequest*>(request);
  IbComm* c = r->comm;
  *done = 0;
  GYRE_CHECK(drainCq(c));
  // A request whose completions all arrived is done even if a later one
  // failed: a peer that finished and closed flushes the receives posted
  // ahead, after the data of the last step had landed.
  if (r->pending > 0) {
    GYRE_CHECK(commFailure(c));
    return ncclSuccess;
  }
  *done = 1;
  if (size) *size = r->size;
  r->used = false;
  return ncclSuccess;
}

}  // namespace gyre::ib
