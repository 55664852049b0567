// What lowering (lower.h) reads of a communicator: its rank, the
// connections made at init and on first use, and the facts the planner
// decides from. The communicator (src/comm) is one (ncclComm derives from
// it) and fills it in at init; both executors lower their calls over it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <vector>

#include "src/plan/planner.h"
#include "src/sched/step.h"
#include "src/transport/transport.h"

namespace gyre {

// One independent pipeline: its peers and a connection per peer and direction.
struct Channel {
  int id = 0;
  std::vector<int> ringRanks;   // the ring: ringRanks[i] sends to ringRanks[i+1] (from the ring search)
  std::vector<int> positionOf;  // inverse: position of each rank in ringRanks
  int position = 0;             // this rank's position
  ChannelPeers peers;
  std::vector<Connection> send;  // indexed like peers.sendPeers
  std::vector<Connection> recv;  // indexed like peers.recvPeers
  std::vector<Connection*> sendPtrs;  // the same, as the arrays lanes index
  std::vector<Connection*> recvPtrs;
};

// One tree of the double binary tree, with the connections its two lanes use.
struct CommTree {
  int id = 0;                  // connection tag space, distinct from rings
  int parent = -1;
  std::vector<int> children;
  std::vector<std::unique_ptr<Connection>> storage;
  std::vector<Connection*> upSend;    // [parent]
  std::vector<Connection*> upRecv;    // per child
  std::vector<Connection*> downSend;  // per child
  std::vector<Connection*> downRecv;  // [parent]
};
constexpr int kTreeChannelBase = 256;

// Recursive doubling (small AllReduce on 4, 8, ... ranks): in round k a rank
// exchanges with rank ^ 2^k over its own connections, made at init.
struct CommDoubling {
  std::vector<std::unique_ptr<Connection>> storage;
  std::vector<Connection*> send;  // by round
  std::vector<Connection*> recv;  // by round
};
constexpr int kDoublingChannelBase = 384;

// Direct algorithms (src/sched/build_direct.h): a connection to and from
// every other rank, made at init where directAvailable() (host memory, one
// host, 3..8 ranks). Indexed by peer rank with this rank left out: peer p sits
// at p < rank ? p : p - 1.
struct CommMesh {
  std::vector<std::unique_ptr<Connection>> storage;
  std::vector<Connection*> send;
  std::vector<Connection*> recv;
};
constexpr int kMeshChannelId = 448;

// Send/recv connections are made on first use, one per peer and direction,
// on this pseudo-channel (distinct connection tags from the rings).
constexpr int kP2PChannelId = 512;

struct Wiring {
  int rank = 0;
  int nranks = 0;
  size_t slotBytes = 0;  // NCCL_BUFFSIZE / kFifoSlots
  std::vector<Channel> channels;  // ring channels made at init
  int minChannels = 1;            // NCCL_MIN_NCHANNELS: the planner uses at least this many
  std::vector<CommTree> trees;    // the two trees of the double binary tree
  CommDoubling doubling;          // empty unless nranks is a power of two >= 4
  CommMesh mesh;                  // empty unless the Direct algorithms can run
  bool singleCopy = false;        // ranks read each other's buffers (process_vm_readv; single_copy.h)
  bool singleCopyAlways = false;  // GYRE_SINGLE_COPY=always
  bool shmRings = false;          // host communicator whose rings all run over shared memory
  const TuningTable* tuning = nullptr;      // the communicator's, from init
  const TunerSession* tuner = nullptr;      // the communicator's tuner plugin session, if any
  const bool* runsKernels = nullptr;        // the device layer's choice (DeviceComm::deviceKernels)
  std::map<int, std::unique_ptr<Connection>> p2pSend;  // by peer rank
  std::map<int, std::unique_ptr<Connection>> p2pRecv;
  // How send/recv connections are made on first use (set at init): the
  // transport to each peer, the rendezvous that exchanges their handles, and
  // the NUMA node their helper threads bind to.
  std::vector<Transport*> p2pTransports;  // by peer rank
  Bootstrap* p2pBootstrap = nullptr;
  int p2pHelperNuma = -1;
};

// The planner's inputs for calls over `w`.
PlanContext planContextOf(const Wiring& w);

}  // namespace gyre
