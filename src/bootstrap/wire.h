// Messages exchanged during bootstrap. All ranks run the same gyre build, so
// these are plain fixed-size structs sent as bytes.
#pragma once

#include <cstdint>

#include "src/bootstrap/net_address.h"

namespace gyre {

// What each rank tells the others about itself at init.
struct PeerInfo {
  int32_t rank;
  int32_t pid;
  uint64_t hostHash;     // same value for ranks on the same host
  WireAddress listen;    // where this rank accepts bootstrap and transport connections
  char host[64];
  int32_t cudaDev;       // -1 for host-memory communicators
  int32_t isHostComm;
  int64_t buffSize;      // NCCL_BUFFSIZE (its default where not set)
  int32_t numaNode;      // NUMA node of the rank's CPU affinity (-1: several or unknown)
  // 1: NCCL_BUFFSIZE was not set, so a host-memory communicator's FIFOs
  // follow each rank's CPU (l2Bytes) and the ranks take the smallest.
  int32_t buffSizeDefault;
  int64_t l2Bytes;       // one core's L2 (0: unknown)
  // The GPU's PCI address (domain << 32 | bus << 16 | device << 8 | function),
  // which names one GPU in every process (ordinals depend on
  // CUDA_VISIBLE_DEVICES); -1 for host-memory communicators.
  int64_t busId;
};

// Rank -> root: "I am rank r of n", proving the unique id's secret. With
// several roots (ncclCommInitRankScalable) a rank reports to root
// rootOfRank(rank) and names root 0, where every root takes its block; root
// i > 0 itself sends root 0 this hello with fromRoot = 1, rank = the first
// rank of its block and root 0's secret, then a RootReply whose nranks is the
// block's size and that many PeerInfo records.
struct RootHello {
  char magic[8];
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  int32_t nRoots;     // 1: one root serves every rank
  int32_t rootIndex;  // the root this hello goes to (a root's hello: the sender's)
  WireAddress firstRoot;
  uint64_t firstRootSecret;
  int32_t fromRoot;
  int32_t pad;
  PeerInfo info;
};

enum RootStatus : int32_t { kRootOk = 0, kRootRefused = 1, kRootFailed = 2 };

// Root -> rank: status, then (if kRootOk) nranks PeerInfo records.
struct RootReply {
  int32_t status;
  int32_t nranks;
  // Drawn by the root per rendezvous and given only to ranks that proved the
  // id's secret; every later connection proves this one, so an id that leaks
  // or is derived from an address (NCCL_COMM_ID) opens no rank's listener.
  uint64_t sessionSecret;
  char message[384];
};

// First message on every rank-to-rank connection: who is calling, for which
// purpose (tag), proving the communicator's session secret.
struct ConnHello {
  char magic[8];
  uint64_t secret;
  int32_t fromRank;
  int32_t tag;
};

constexpr char kRootHelloMagic[8] = {'G', 'Y', 'R', 'E', 'H', 'E', 'L', 'O'};
constexpr char kConnHelloMagic[8] = {'G', 'Y', 'R', 'E', 'C', 'O', 'N', 'N'};

// Connection tags. Transport tags encode channel and purpose above this base.
constexpr int32_t kTagBootstrapRing = 1;
// A liveness probe from a rank waiting for this one to connect: dropped.
constexpr int32_t kTagProbe = 2;
constexpr int32_t kTagTransportBase = 1000;

}  // namespace gyre
