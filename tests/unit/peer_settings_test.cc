// What the ranks of a communicator must agree on at init (src/comm/peer_settings.h):
// the kind of communicator, and NCCL_BUFFSIZE, whose default for host-memory
// communicators follows each rank's CPU and host and resolves to the smallest.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "src/comm/peer_settings.h"
#include "src/debug/error.h"

using namespace gyre;

namespace {

// A rank on host `host` whose CPU has an L2 of `l2` bytes.
PeerInfo rank(int r, int64_t buffSize, bool isDefault, uint64_t host = 1, int64_t l2 = 512 << 10,
              bool hostComm = true) {
  PeerInfo p{};
  p.rank = r;
  p.hostHash = host;
  p.buffSize = buffSize;
  p.buffSizeDefault = isDefault ? 1 : 0;
  p.l2Bytes = l2;
  p.isHostComm = hostComm ? 1 : 0;
  return p;
}

constexpr int64_t kNcclDefault = 4 << 20;

}  // namespace

TEST_CASE("ranks whose NCCL_BUFFSIZE is unset take the smallest of their CPUs' FIFOs, computed alike on every "
          "rank from the records") {
  int64_t bytes = 0;
  bool allDefault = false;
  // Four ranks on one host with 512 KiB L2s: two L2s each.
  std::vector<PeerInfo> four = {rank(0, kNcclDefault, true), rank(1, kNcclDefault, true),
                                rank(2, kNcclDefault, true), rank(3, kNcclDefault, true)};
  REQUIRE(agreeOnPeerSettings(four, &bytes, &allDefault) == ncclSuccess);
  CHECK(bytes == (1 << 20));
  CHECK(allDefault);
  // A pair keeps NCCL's default.
  std::vector<PeerInfo> pair(four.begin(), four.begin() + 2);
  REQUIRE(agreeOnPeerSettings(pair, &bytes, &allDefault) == ncclSuccess);
  CHECK(bytes == kNcclDefault);
  // Two hosts: three ranks on a 2 MiB-L2 host (4 MiB), one alone on another
  // (4 MiB) and then a 3-rank 512 KiB-L2 host: everyone takes its 1 MiB.
  std::vector<PeerInfo> hosts = {rank(0, kNcclDefault, true, 1, 2 << 20), rank(1, kNcclDefault, true, 1, 2 << 20),
                                 rank(2, kNcclDefault, true, 1, 2 << 20), rank(3, kNcclDefault, true, 2)};
  REQUIRE(agreeOnPeerSettings(hosts, &bytes, &allDefault) == ncclSuccess);
  CHECK(bytes == kNcclDefault);
  for (int r = 4; r < 7; ++r) hosts.push_back(rank(r, kNcclDefault, true, 3));
  REQUIRE(agreeOnPeerSettings(hosts, &bytes, &allDefault) == ncclSuccess);
  CHECK(bytes == (1 << 20));
  // Device communicators keep NCCL's default whatever the CPU.
  std::vector<PeerInfo> device;
  for (int r = 0; r < 4; ++r) device.push_back(rank(r, kNcclDefault, true, 1, 512 << 10, false));
  REQUIRE(agreeOnPeerSettings(device, &bytes, &allDefault) == ncclSuccess);
  CHECK(bytes == kNcclDefault);
}

TEST_CASE("a set NCCL_BUFFSIZE must be the same on every rank, and the error says which value was a default") {
  int64_t bytes = 0;
  bool allDefault = true;
  std::vector<PeerInfo> same = {rank(0, 65536, false), rank(1, 65536, false)};
  REQUIRE(agreeOnPeerSettings(same, &bytes, &allDefault) == ncclSuccess);
  CHECK(bytes == 65536);
  CHECK_FALSE(allDefault);

  std::vector<PeerInfo> mixed = {rank(0, 65536, false), rank(1, kNcclDefault, true), rank(2, 65536, false)};
  CHECK(agreeOnPeerSettings(mixed, &bytes, &allDefault) == ncclInvalidUsage);
  const std::string text = lastErrorText();
  CHECK(text.find("NCCL_BUFFSIZE differs between ranks: rank 0 has 65536, rank 1 has 1048576 (its default)") !=
        std::string::npos);

  std::vector<PeerInfo> differ = {rank(0, 65536, false), rank(1, 131072, false)};
  CHECK(agreeOnPeerSettings(differ, &bytes, &allDefault) == ncclInvalidUsage);
  CHECK(std::string(lastErrorText()).find("rank 1 has 131072") != std::string::npos);
}

TEST_CASE("a host-memory communicator and a device one cannot meet") {
  int64_t bytes = 0;
  bool allDefault = false;
  std::vector<PeerInfo> peers = {rank(0, kNcclDefault, true, 1, 512 << 10, false), rank(1, kNcclDefault, true)};
  CHECK(agreeOnPeerSettings(peers, &bytes, &allDefault) == ncclInvalidUsage);
  CHECK(std::string(lastErrorText()).find("rank 1 created a host-memory communicator but rank 0 a device one") !=
        std::string::npos);
}
