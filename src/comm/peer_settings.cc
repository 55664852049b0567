#include "src/comm/peer_settings.h"

#include <algorithm>
#include <unordered_map>

#include "src/debug/error.h"
#include "src/plan/host_thresholds.h"

namespace gyre {
namespace {

// Each rank's FIFO bytes on its own: NCCL_BUFFSIZE where set, else for a
// host-memory communicator what its CPU and its host's rank count give.
std::vector<int64_t> ownBuffSizes(const std::vector<PeerInfo>& peers) {
  std::unordered_map<uint64_t, int> ranksOnHost;
  for (const PeerInfo& p : peers) ++ranksOnHost[p.hostHash];
  std::vector<int64_t> out;
  out.reserve(peers.size());
  for (const PeerInfo& p : peers) {
    if (!p.buffSizeDefault || !p.isHostComm) {
      out.push_back(p.buffSize);
      continue;
    }
    topo::CpuFacts cpu;
    cpu.l2Bytes = static_cast<size_t>(std::max<int64_t>(0, p.l2Bytes));
    out.push_back(static_cast<int64_t>(hostFifoBytesForCpu(cpu, ranksOnHost[p.hostHash], nullptr)));
  }
  return out;
}

const char* buffSizeOrigin(const PeerInfo& p) { return p.buffSizeDefault ? " (its default)" : ""; }

}  // namespace

ncclResult_t agreeOnPeerSettings(const std::vector<PeerInfo>& peers, int64_t* buffSize, bool* allDefault) {
  if (peers.empty()) return fail(ncclInternalError, "no ranks to agree with");
  const std::vector<int64_t> own = ownBuffSizes(peers);
  bool defaults = true;
  for (const PeerInfo& p : peers) defaults = defaults && p.buffSizeDefault;
  for (size_t r = 1; r < peers.size(); ++r) {
    if (peers[r].isHostComm != peers[0].isHostComm)
      return fail(ncclInvalidUsage, "rank %zu created a %s communicator but rank 0 a %s one", r,
                  peers[r].isHostComm ? "host-memory" : "device", peers[0].isHostComm ? "host-memory" : "device");
    if (!defaults && own[r] != own[0])
      return fail(ncclInvalidUsage, "NCCL_BUFFSIZE differs between ranks: rank 0 has %lld%s, rank %zu has %lld%s",
                  static_cast<long long>(own[0]), buffSizeOrigin(peers[0]), r, static_cast<long long>(own[r]),
                  buffSizeOrigin(peers[r]));
  }
  *buffSize = *std::min_element(own.begin(), own.end());
  *allDefault = defaults;
  return ncclSuccess;
}

}  // namespace gyre
