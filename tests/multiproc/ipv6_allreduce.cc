// AllReduce over IPv6 loopback: the rendezvous, the bootstrap and the socket transport
// (NCCL_SHM_DISABLE=1) all on ::1, with the id from ncclGetUniqueId and from
// NCCL_COMM_ID=[::1]:port. Results are checked against the independent reference
// (tests/support/reference.h). Without ::1 on lo the binary exits 77 (meson: SKIP).
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "../support/reference.h"
#include "../support/log_dir.h"

namespace {

using namespace gyre::test;

bool loHasIpv6Loopback() {
  std::ifstream in("/proc/net/if_inet6");
  std::string addr, index, prefix, scope, flags, name;
  while (in >> addr >> index >> prefix >> scope >> flags >> name)
    if (addr == "00000000000000000000000000000001" && name == "lo") return true;
  return false;
}

// Decided before main: every case needs ::1, and exit status 77 is meson's SKIP.
[[maybe_unused]] const bool kIpv6Present = [] {
  if (!loHasIpv6Loopback()) {
    fprintf(stderr, "SKIP: lo has no ::1 (/proc/net/if_inet6)\n");
    _exit(77);
  }
  return true;
}();

// A TCP port on ::1 that was free a moment ago.
int pickFreeV6Port() {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  socklen_t len = sizeof addr;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin6_port);
  close(fd);
  return port;
}

struct Case {
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;
};
// One element, an odd size across steps, and 1 MiB (several 512 KiB pipeline steps).
const Case kCases[] = {{ncclFloat32, ncclSum, 1}, {ncclInt32, ncclSum, 4099}, {ncclFloat64, ncclMax, 1000},
                       {ncclFloat32, ncclSum, 262144}};

int allReduceCases(ncclComm_t comm, int rank, int n) {
  for (size_t c = 0; c < sizeof(kCases) / sizeof(kCases[0]); ++c) {
    const Case& k = kCases[c];
    const TypeInfo& t = typeInfo(k.type);
    std::vector<std::vector<char>> inputs(n, std::vector<char>(k.count * t.size));
    std::vector<const void*> ptrs;
    for (int r = 0; r < n; ++r) {
      fillInput(t, k.op, n, inputSeed(c, r), inputs[r].data(), k.count);
      ptrs.push_back(inputs[r].data());
    }
    std::vector<char> out(k.count * t.size);
    ncclResult_t r = ncclAllReduce(inputs[rank].data(), out.data(), k.count, k.type, k.op, comm, nullptr);
    RANK_CHECK(r == ncclSuccess, "rank %d: %s %s of %zu returned %d: %s", rank, t.name, opName(k.op), k.count,
               int(r), lastError().c_str());
    std::string wrong = compareToReference(t, k.op, ptrs, out.data(), k.count);
    RANK_CHECK(wrong.empty(), "rank %d: %s %s of %zu: %s", rank, t.name, opName(k.op), k.count, wrong.c_str());
  }
  return 0;
}

void runOverIpv6(int nranks, bool viaCommId) {
  LogDir logs;
  REQUIRE(logs.ok());
  RankOptions options;
  options.timeout_s = 60;
  options.idMode = viaCommId ? IdMode::kNone : IdMode::kParent;
  options.env = {{"NCCL_SOCKET_FAMILY", "AF_INET6"}, {"NCCL_SOCKET_IFNAME", "lo"},
                 {"NCCL_SHM_DISABLE", "1"},          {"GYRE_INIT_TIMEOUT", "20"},
                 {"GYRE_TIMEOUT", "20"},             {"NCCL_DEBUG", "INFO"},
                 {"NCCL_DEBUG_SUBSYS", "INIT"},      {"NCCL_DEBUG_FILE", logs.pattern()}};
  if (viaCommId) {
    const int port = pickFreeV6Port();
    REQUIRE(port > 0);
    options.env.push_back({"NCCL_COMM_ID", "[::1]:" + std::to_string(port)});
  }
  RunResult result = runRanks(
      nranks,
      [viaCommId](int rank, int n, const ncclUniqueId& parentId) {
        ncclUniqueId id = parentId;
        if (viaCommId)
          RANK_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "rank %d: ncclGetUniqueId: %s", rank,
                     lastError().c_str());
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        if (allReduceCases(comm, rank, n) != 0) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  // Proof that the traffic used ::1: every rank's listener (which the socket
  // transport connects to) and, for a parent-made id, the root were there, and
  // the rings ran over the socket transport.
  INFO(logs.allText());
  CHECK(logs.linesWith({"bootstrap done: rank", "listening on [::1]:"}).size() == size_t(nranks));
  CHECK(logs.linesWith({"listening on 127."}).empty());
  CHECK(!logs.linesWith({"ring channel", "over socket"}).empty());
  CHECK(logs.linesWith({"ring channel", "over shm"}).empty());
  if (!viaCommId) CHECK(logs.linesWith({"rendezvous root listening on [::1]:"}).size() == 1);
}

}  // namespace

TEST_CASE("AllReduce over IPv6 loopback with a parent-made id equals the reference on 2 and 3 ranks",
          "[ipv6]") {
  const int nranks = GENERATE(2, 3);
  INFO(nranks << " ranks");
  runOverIpv6(nranks, false);
}

TEST_CASE("AllReduce over IPv6 loopback with NCCL_COMM_ID=[::1]:port equals the reference on 2 and 3 ranks",
          "[ipv6]") {
  const int nranks = GENERATE(2, 3);
  INFO(nranks << " ranks");
  runOverIpv6(nranks, true);
}
