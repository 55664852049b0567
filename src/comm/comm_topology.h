// What communicator init learns about where its ranks run, and the plans it
// derives from that once: every rank's host topology (each host's first rank
// detects or loads it and shares it as XML over the bootstrap ring, so all
// ranks plan over identical inputs and reach identical answers), the ring
// orders of the graph search, the cost-model choices per collective and
// size, and the transport policy per edge.
#pragma once

#include <atomic>

#include "include/gyre.h"
#include "src/debug/deadline.h"
#include "src/plan/planner.h"
#include "src/plan/ring_order.h"
#include "src/plan/tuning.h"
#include "src/topology/placement.h"
#include "src/topology/transport_policy.h"

struct ncclComm;

namespace gyre {

class Transport;

struct CommTopology {
  topo::Placement placement;
  topo::TransportPolicy policy;
  RingPlan rings;
  TuningTable tuning;
  int minChannels = 1;  // NCCL_MIN_NCHANNELS as set (the rings may be fewer)
  int maxChannels = 1;  // NCCL_MAX_NCHANNELS
};

// Gathers the placement and runs the ring search with the channel limits of
// NCCL_MIN/MAX_NCHANNELS. Needs comm->bootstrap; collective over the ranks.
ncclResult_t discoverTopology(ncclComm* comm, const Deadline& deadline, CommTopology* out);

// Device communicators that run kernels: rings again with at least
// kKernelMinChannels channels (a kernel moves a channel's data with one
// thread block, so bandwidth needs many), and the tuning table for them
// (which may pick the LL protocol, which only kernels run).
ncclResult_t planKernelRings(ncclComm* comm, CommTopology* t);
constexpr int kKernelMinChannels = 16;

// The NUMA node a rank's helper threads bind to: the CPU nearest its GPU,
// or for host memory the node its affinity names (-1: unknown or several).
int helperNumaNode(const CommTopology& t, int rank);

// The transport for the edge to `peer`: the network (sockets) between hosts
// or where the policy forbids shared memory, else the first registered
// transport that accepts the pair.
Transport* transportForPeer(const ncclComm* comm, int peer, bool forDeviceExecutor = false);
// Whether some edge from this rank goes over the network (another host, or
// the policy forbids shared memory); asks nothing of the network itself.
bool anyNetworkEdge(const ncclComm* comm);
// Whether every edge from this rank may be a p2p connection (the device
// executor needs all of a communicator's edges to be).
bool p2pToEveryPeer(const ncclComm* comm);

// Opens the process's tuner plugin (NCCL_TUNER_PLUGIN) for this
// communicator, with its ranks and hosts; without one, or when the plugin's
// init fails (warned), the communicator plans without it.
void openTuner(ncclComm* comm);

// The planner's view of the communicator (src/plan/planner.h), after init.
PlanContext planContextOf(const ncclComm* comm);

}  // namespace gyre
