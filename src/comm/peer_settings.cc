#include "src/comm/peer_settings.h"

#include <algorithm>

#include "src/debug/error.h"
#include "src/plan/host_thresholds.h"

namespace gyre {
namespace {

int ranksOnHostOf(const std::vector<PeerInfo>& peers, const PeerInfo& p) {
  int n = 0;
  for (const PeerInfo& q : peers) n += q.hostHash == p.hostHash ? 1 : 0;
  return n;
}

// What rank p's FIFOs would be on its own: NCCL_BUFFSIZE where set, else for
// a host-memory communicator what its CPU and its host's rank count give.
int64_t ownBuffSize(const std::vector<PeerInfo>& peers, const PeerInfo& p) {
  if (!p.buffSizeDefault || !p.isHostComm) return p.buffSize;
  topo::CpuFacts cpu;
  cpu.l2Bytes = static_cast<size_t>(std::max<int64_t>(0, p.l2Bytes));
  return static_cast<int64_t>(hostFifoBytesForCpu(cpu, ranksOnHostOf(peers, p), nullptr));
}

const char* buffSizeOrigin(const PeerInfo& p) { return p.buffSizeDefault ? " (its default)" : ""; }

}  // namespace

ncclResult_t agreeOnPeerSettings(const std::vector<PeerInfo>& peers, int64_t* buffSize, bool* allDefault) {
  if (peers.empty()) return fail(ncclInternalError, "no ranks to agree with");
  bool defaults = true;
  int64_t smallest = ownBuffSize(peers, peers[0]);
  for (const PeerInfo& p : peers) {
    defaults = defaults && p.buffSizeDefault;
    smallest = std::min(smallest, ownBuffSize(peers, p));
  }
  for (size_t r = 1; r < peers.size(); ++r) {
    if (peers[r].isHostComm != peers[0].isHostComm)
      return fail(ncclInvalidUsage, "rank %zu created a %s communicator but rank 0 a %s one", r,
                  peers[r].isHostComm ? "host-memory" : "device", peers[0].isHostComm ? "host-memory" : "device");
    const int64_t first = ownBuffSize(peers, peers[0]), mine = ownBuffSize(peers, peers[r]);
    if (!defaults && mine != first)
      return fail(ncclInvalidUsage, "NCCL_BUFFSIZE differs between ranks: rank 0 has %lld%s, rank %zu has %lld%s",
                  static_cast<long long>(first), buffSizeOrigin(peers[0]), r, static_cast<long long>(mine),
                  buffSizeOrigin(peers[r]));
  }
  *buffSize = smallest;
  *allDefault = defaults;
  return ncclSuccess;
}

}  // namespace gyre
