// The IB part of forgeAcknowledgement (forged_steps.h): a receiver's FIFO
// entry, written into the sender's FIFO by RDMA as the IB network's irecv
// writes one (src/transport/ib/ib_comm.h), with a sequence number that lies.
#include "forged_steps.h"

#if __has_include(<infiniband/verbs.h>)

#include "../support/fork_ranks.h"
#include "src/debug/error.h"
#include "src/transport/ib/ib_comm.h"
#include "src/transport/ib/ib_qp.h"
#include "src/transport/net/net_conn.h"

namespace gyre::test {

std::string forgeIbAcknowledgement(Connection& in, uint64_t ahead) {
  auto* c = static_cast<net_detail::NetConn*>(in.state);
  auto* ib = static_cast<ib::IbComm*>(c->comm);
  // The library's own receives for the first kFifoSlots steps, and their
  // data: the sender's next send then waits on the next receive's entry.
  const double until = monotonicSeconds() + 5;
  while (loadAcquire(in.fifo.tail) < kFifoSlots) {
    int culprit = -1;
    if (in.transport->progress(in, &culprit) != ncclSuccess) return std::string("receiving: ") + lastErrorText();
    if (monotonicSeconds() > until) return "the sender never filled its FIFO";
  }
  const uint64_t next = ib->index;
  ib::FifoEntry& e = ib->fifo[next % ib::kIbSlots];
  e.addr = reinterpret_cast<uintptr_t>(c->slots);
  e.rkey = static_cast<ib::IbMr*>(c->mhSlots)->mr->rkey;
  e.size = static_cast<uint32_t>(c->slotBytes);
  e.seq = next + 1 + ahead;
  if (ib::writeFifoEntry(ib, static_cast<int>(next % ib::kIbSlots)) != ncclSuccess)
    return std::string("writing the FIFO entry: ") + lastErrorText();
  return "";
}

}  // namespace gyre::test

#else

namespace gyre::test {

std::string forgeIbAcknowledgement(Connection&, uint64_t) { return "this build has no infiniband/verbs.h"; }

}  // namespace gyre::test

#endif
