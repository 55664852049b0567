#include "src/comm/connect_channels.h"

#include <cstring>

#include "src/comm/comm.h"
#include "src/comm/executor_binding.h"
#include "src/host/host_comm.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/plan/cost_model.h"
#include "src/plan/trees.h"

namespace gyre {
namespace {

ncclResult_t openConnection(ncclComm* comm, int channel, const Deadline& deadline, int peer, bool isSend,
                            Connection* c) {
  ConnectContext ctx{comm->bootstrap.get(), comm->rank, channel, comm->slotBytes, deadline, &comm->abortFlag,
                     helperNumaNode(*comm->topology, comm->rank)};
  c->peer = peer;
  c->isSend = isSend;
  c->transport = transportForPeer(comm, peer, runsKernels(comm));
  GYRE_CHECK(isSend ? c->transport->connectSend(ctx, peer, c) : c->transport->connectRecv(ctx, peer, c));
  GYRE_INFO("INIT", "channel %d: rank %d %s rank %d via %s", channel, comm->rank, isSend ? "->" : "<-", peer,
            c->transport->via(*c).c_str());
  comm->host->progress.add(c);
  return ncclSuccess;
}

// Opens a connection kept in `storage` (trees, doubling) and files it under `list`.
ncclResult_t openOwnedConnection(ncclComm* comm, std::vector<std::unique_ptr<Connection>>* storage, int channel,
                                 const Deadline& deadline, int peer, bool isSend, std::vector<Connection*>* list) {
  storage->push_back(std::make_unique<Connection>());
  list->push_back(storage->back().get());
  return openConnection(comm, channel, deadline, peer, isSend, storage->back().get());
}

ncclResult_t openTreeConnection(ncclComm* comm, CommTree* tree, const Deadline& deadline, int peer, bool isSend,
                                std::vector<Connection*>* list) {
  return openOwnedConnection(comm, &tree->storage, tree->id, deadline, peer, isSend, list);
}

}  // namespace

ncclResult_t connectRings(ncclComm* comm, const Deadline& deadline) {
  const RingPlan& plan = comm->topology->rings;
  int n = comm->nranks;
  comm->channels.resize(plan.channels.size());
  for (size_t k = 0; k < plan.channels.size(); ++k) {
    Channel& ch = comm->channels[k];
    ch.id = static_cast<int>(k);
    ch.ringRanks = plan.channels[k].order;
    ch.positionOf.assign(n, 0);
    for (int i = 0; i < n; ++i) ch.positionOf[ch.ringRanks[i]] = i;
    ch.position = ch.positionOf[comm->rank];
  }
  if (n == 1) return ncclSuccess;
  // All outgoing connections of every channel first, then the incoming ones.
  for (Channel& ch : comm->channels) {
    ch.peers.sendPeers = {ch.ringRanks[(ch.position + 1) % n]};
    ch.peers.recvPeers = {ch.ringRanks[(ch.position + n - 1) % n]};
    ch.send.resize(1);
    ch.recv.resize(1);
    GYRE_CHECK(openConnection(comm, ch.id, deadline, ch.peers.sendPeers[0], true, &ch.send[0]));
    ch.sendPtrs.push_back(&ch.send[0]);
  }
  for (Channel& ch : comm->channels) {
    GYRE_CHECK(openConnection(comm, ch.id, deadline, ch.peers.recvPeers[0], false, &ch.recv[0]));
    ch.recvPtrs.push_back(&ch.recv[0]);
  }
  for (const Channel& ch : comm->channels)
    GYRE_INFO("INIT", "ring channel %d: %d -> %d -> %d over %s", ch.id, ch.peers.recvPeers[0], comm->rank,
              ch.peers.sendPeers[0], ch.send[0].transport->name());
  return ncclSuccess;
}

ncclResult_t connectTrees(ncclComm* comm, const Deadline& deadline) {
  TreePlan plan;
  GYRE_CHECK(commTrees(comm->topology->placement, comm->topology->rings, &plan));
  comm->trees.resize(2);
  for (int t = 0; t < 2; ++t) {
    CommTree& tc = comm->trees[t];
    tc.id = kTreeChannelBase + t;
    tc.parent = plan.channels[t].ranks[comm->rank].parent;
    tc.children = plan.channels[t].ranks[comm->rank].children;
    if (tc.parent >= 0) GYRE_CHECK(openTreeConnection(comm, &tc, deadline, tc.parent, true, &tc.upSend));
    for (int child : tc.children) GYRE_CHECK(openTreeConnection(comm, &tc, deadline, child, true, &tc.downSend));
  }
  for (CommTree& tc : comm->trees) {
    for (int child : tc.children) GYRE_CHECK(openTreeConnection(comm, &tc, deadline, child, false, &tc.upRecv));
    if (tc.parent >= 0) GYRE_CHECK(openTreeConnection(comm, &tc, deadline, tc.parent, false, &tc.downRecv));
    GYRE_INFO("INIT", "tree %d: parent %d, %zu children", tc.id - kTreeChannelBase, tc.parent, tc.children.size());
  }
  return ncclSuccess;
}

ncclResult_t finishConnections(ncclComm* comm) {
  ncclResult_t r = ncclSuccess;
  anyInitConnection(comm, [&](Connection* c) { return (r = c->transport->finishConnect(*c)) != ncclSuccess; });
  return r;
}

ncclResult_t connectDoubling(ncclComm* comm, const Deadline& deadline) {
  int n = comm->nranks;
  if (n < 4 || (n & (n - 1)) != 0) return ncclSuccess;
  CommDoubling& d = comm->doubling;
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  for (bool isSend : {true, false})  // every send first, as everywhere at init
    for (int k = 0; k < rounds; ++k)
      GYRE_CHECK(openOwnedConnection(comm, &d.storage, kDoublingChannelBase + k, deadline, comm->rank ^ (1 << k),
                                     isSend, isSend ? &d.send : &d.recv));
  return ncclSuccess;
}

ncclResult_t connectMesh(ncclComm* comm, const Deadline& deadline) {
  int n = comm->nranks;
  if (runsKernels(comm) || !directAvailable(comm->isHost, comm->topology->rings.nhosts, n)) return ncclSuccess;
  CommMesh& m = comm->mesh;
  for (bool isSend : {true, false})  // every send first, as everywhere at init
    for (int peer = 0; peer < n; ++peer)
      if (peer != comm->rank)
        GYRE_CHECK(openOwnedConnection(comm, &m.storage, kMeshChannelId, deadline, peer, isSend,
                                       isSend ? &m.send : &m.recv));
  GYRE_INFO("INIT", "mesh: %d connections each way for the Direct algorithms", n - 1);
  return ncclSuccess;
}

bool ringsOnSharedMemory(const ncclComm* comm) {
  if (!comm->isHost || comm->nranks < 2 || comm->channels.empty()) return false;
  for (const Channel& ch : comm->channels)
    if (strcmp(ch.send[0].transport->name(), "shm") != 0) return false;
  return true;
}

}  // namespace gyre
