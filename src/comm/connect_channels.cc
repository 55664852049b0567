#include "src/comm/connect_channels.h"

#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/plan/trees.h"

namespace gyre {
namespace {

ncclResult_t openConnection(ncclComm* comm, const ConnectContext& ctx, int peer, bool isSend, Connection* c) {
  const auto& peers = comm->bootstrap->peers();
  c->peer = peer;
  c->isSend = isSend;
  c->transport = pickTransport(peers[comm->rank], peers[peer]);
  GYRE_CHECK(isSend ? c->transport->connectSend(ctx, peer, c) : c->transport->connectRecv(ctx, peer, c));
  comm->progress.add(c);
  return ncclSuccess;
}

}  // namespace

ncclResult_t connectRings(ncclComm* comm, int nchannels, const Deadline& deadline) {
  comm->channels.resize(nchannels);
  for (int k = 0; k < nchannels; ++k) comm->channels[k].id = k;
  if (comm->nranks == 1) return ncclSuccess;
  // All outgoing connections of every channel first, then the incoming ones.
  for (Channel& ch : comm->channels) {
    ch.peers.sendPeers = {(comm->rank + 1) % comm->nranks};
    ch.peers.recvPeers = {(comm->rank + comm->nranks - 1) % comm->nranks};
    ch.send.resize(ch.peers.sendPeers.size());
    ch.recv.resize(ch.peers.recvPeers.size());
    ConnectContext ctx{comm->bootstrap.get(), comm->rank, ch.id, comm->slotBytes, deadline, &comm->abortFlag};
    for (size_t i = 0; i < ch.send.size(); ++i) {
      GYRE_CHECK(openConnection(comm, ctx, ch.peers.sendPeers[i], true, &ch.send[i]));
      ch.sendPtrs.push_back(&ch.send[i]);
    }
  }
  for (Channel& ch : comm->channels) {
    ConnectContext ctx{comm->bootstrap.get(), comm->rank, ch.id, comm->slotBytes, deadline, &comm->abortFlag};
    for (size_t i = 0; i < ch.recv.size(); ++i) {
      GYRE_CHECK(openConnection(comm, ctx, ch.peers.recvPeers[i], false, &ch.recv[i]));
      ch.recvPtrs.push_back(&ch.recv[i]);
    }
  }
  GYRE_INFO("INIT", "%d ring channel(s): %d -> %d -> %d over %s", nchannels, comm->channels[0].peers.recvPeers[0],
            comm->rank, comm->channels[0].peers.sendPeers[0], comm->channels[0].send[0].transport->name());
  return ncclSuccess;
}

ncclResult_t connectTrees(ncclComm* comm, const Deadline& deadline) {
  // Each rank is its own node here: on one host a binary tree over the ranks
  // gives log(n) depth, where a per-host chain would be as deep as the ring.
  std::vector<int> parents[2];
  doubleBinaryTree(comm->nranks, &parents[0], &parents[1]);
  comm->trees.resize(2);
  for (int t = 0; t < 2; ++t) {
    CommTree& tc = comm->trees[t];
    tc.id = kTreeChannelBase + t;
    tc.parent = parents[t][comm->rank];
    for (int r = 0; r < comm->nranks; ++r)
      if (parents[t][r] == comm->rank) tc.children.push_back(r);
    ConnectContext ctx{comm->bootstrap.get(), comm->rank, tc.id, comm->slotBytes, deadline, &comm->abortFlag};
    auto open = [&](int peer, bool isSend, std::vector<Connection*>* list) {
      tc.storage.push_back(std::make_unique<Connection>());
      list->push_back(tc.storage.back().get());
      return openConnection(comm, ctx, peer, isSend, tc.storage.back().get());
    };
    if (tc.parent >= 0) GYRE_CHECK(open(tc.parent, true, &tc.upSend));
    for (int child : tc.children) GYRE_CHECK(open(child, true, &tc.downSend));
  }
  for (CommTree& tc : comm->trees) {
    ConnectContext ctx{comm->bootstrap.get(), comm->rank, tc.id, comm->slotBytes, deadline, &comm->abortFlag};
    auto open = [&](int peer, std::vector<Connection*>* list) {
      tc.storage.push_back(std::make_unique<Connection>());
      list->push_back(tc.storage.back().get());
      return openConnection(comm, ctx, peer, false, tc.storage.back().get());
    };
    for (int child : tc.children) GYRE_CHECK(open(child, &tc.upRecv));
    if (tc.parent >= 0) GYRE_CHECK(open(tc.parent, &tc.downRecv));
    GYRE_INFO("INIT", "tree %d: parent %d, %zu children", tc.id - kTreeChannelBase, tc.parent, tc.children.size());
  }
  return ncclSuccess;
}

}  // namespace gyre
