// The bootstrap's secrets under well-formed impostors: hellos in the real wire format
// (src/bootstrap/wire.h) that carry the wrong secret, sent to the rendezvous root and to
// a rank's peer listener; a stale unique id; a rank of another job at the same
// NCCL_COMM_ID. Each must be refused (and logged at WARN) without disturbing the real
// ranks. Every wait is bounded by a small GYRE_INIT_TIMEOUT / GYRE_TIMEOUT, and every
// socket wait of the impostors by a deadline.
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "../support/log_dir.h"
#include "src/bootstrap/wire.h"

namespace {

using namespace gyre::test;

// The head of the id as src/bootstrap/unique_id.cc lays it out (IdLayout); the magic
// is checked, so a changed layout fails the test instead of forging nonsense.
struct IdHead {
  char magic[8];
  uint64_t secret;
  gyre::WireAddress root;
};
constexpr char kIdMagic[8] = {'G', 'Y', 'R', 'E', 'U', 'I', 'D', 1};

bool readIdHead(const ncclUniqueId& id, IdHead* head) {
  memcpy(head, id.internal, sizeof(*head));
  return memcmp(head->magic, kIdMagic, sizeof(kIdMagic)) == 0;
}

// The tag a point-to-point socket connection asks for (channel kP2PChannelId = 512 in
// src/comm/comm.h): a forged hello with it would take the place of the real sender's.
constexpr int32_t kP2PTransportTag = gyre::kTagTransportBase + 512;

sockaddr_storage toSockaddr(const gyre::WireAddress& w, socklen_t* len) {
  sockaddr_storage ss{};
  if (w.family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(w.port);
    memcpy(&in6->sin6_addr, w.addr, 16);
    *len = sizeof(sockaddr_in6);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(w.port);
    memcpy(&in->sin_addr, w.addr, 4);
    *len = sizeof(sockaddr_in);
  }
  return ss;
}

// "127.0.0.1:4242" or "[::1]:4242" (as gyre logs addresses) into a WireAddress.
bool parseLogged(const std::string& text, gyre::WireAddress* w) {
  *w = {};
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = text.substr(0, colon);
  w->port = uint16_t(atoi(text.c_str() + colon + 1));
  if (host.size() > 2 && host.front() == '[') {
    w->family = AF_INET6;
    return inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), w->addr) == 1;
  }
  w->family = AF_INET;
  return inet_pton(AF_INET, host.c_str(), w->addr) == 1;
}

// Connects, retrying refused connections until `deadline`; -1 if it never could.
int connectBy(const gyre::WireAddress& to, double deadline) {
  socklen_t len = 0;
  sockaddr_storage ss = toSockaddr(to, &len);
  while (monotonicSeconds() < deadline) {
    int fd = socket(to.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) return fd;
    close(fd);
    usleep(5000);
  }
  return -1;
}

bool sendBytes(int fd, const void* p, size_t n) {
  for (size_t off = 0; off < n;) {
    ssize_t k = send(fd, static_cast<const char*>(p) + off, n - off, MSG_NOSIGNAL);
    if (k <= 0) return false;
    off += size_t(k);
  }
  return true;
}

bool recvBytes(int fd, void* p, size_t n, double timeout_s) {
  const double deadline = monotonicSeconds() + timeout_s;
  for (size_t off = 0; off < n;) {
    pollfd pf{fd, POLLIN, 0};
    int ms = int((deadline - monotonicSeconds()) * 1000);
    if (ms <= 0 || poll(&pf, 1, ms) <= 0) return false;
    ssize_t k = recv(fd, static_cast<char*>(p) + off, n - off, 0);
    if (k <= 0) return false;
    off += size_t(k);
  }
  return true;
}

// Joins the rendezvous at `root` as rank `rank` of `nranks` with `secret` and returns
// the root's answer ("status N: message"), or why there was none.
std::string forgeRankHello(const gyre::WireAddress& root, uint64_t secret, int rank, int nranks) {
  int fd = connectBy(root, monotonicSeconds() + 10);
  if (fd < 0) return "could not connect to the root";
  gyre::RootHello hello{};
  memcpy(hello.magic, gyre::kRootHelloMagic, sizeof(hello.magic));
  hello.secret = secret;
  hello.rank = rank;
  hello.nranks = nranks;
  hello.info.rank = rank;
  hello.info.pid = getpid();
  hello.info.isHostComm = 1;
  hello.info.cudaDev = -1;
  snprintf(hello.info.host, sizeof(hello.info.host), "impostor");
  gyre::RootReply reply{};
  std::string out = "no reply";
  if (sendBytes(fd, &hello, sizeof(hello)) && recvBytes(fd, &reply, sizeof(reply), 10)) {
    reply.message[sizeof(reply.message) - 1] = '\0';
    out = "status " + std::to_string(reply.status) + ": " + reply.message;
  }
  close(fd);
  return out;
}

int32_t expectedSum(int n) { return n * (n + 1) / 2; }

// AllReduce of rank+1 over the communicator, checked against n(n+1)/2.
bool sumOfRanksIsRight(ncclComm_t comm, int rank, int n, std::string* why) {
  int32_t in = rank + 1, out = 0;
  ncclResult_t r = ncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, comm, nullptr);
  if (r == ncclSuccess && out == expectedSum(n)) return true;
  *why = "allreduce returned " + std::to_string(int(r)) + " (" + lastError() + "), sum " + std::to_string(out);
  return false;
}

// A genuine rank: joins with `id`, checks the sum of ranks, leaves.
int joinSumAndLeave(const ncclUniqueId& id, int rank, int n) {
  ncclComm_t comm = nullptr;
  ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
  RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
  std::string why;
  RANK_CHECK(sumOfRanksIsRight(comm, rank, n, &why), "rank %d: %s", rank, why.c_str());
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
  return 0;
}

RankOptions optionsLogging(const LogDir& logs, IdMode mode) {
  RankOptions options;
  options.idMode = mode;
  options.timeout_s = 40;
  options.env = {{"GYRE_INIT_TIMEOUT", "5"},      {"GYRE_TIMEOUT", "5"},
                 {"NCCL_DEBUG", "INFO"},          {"NCCL_DEBUG_SUBSYS", "INIT"},
                 {"NCCL_DEBUG_FILE", logs.pattern()}};
  return options;
}

}  // namespace

TEST_CASE("a rank hello with the wrong secret is refused by the rendezvous root, logged at WARN, "
          "and the real ranks still form the communicator",
          "[bootstrap][secret]") {
  LogDir logs;
  REQUIRE(logs.ok());
  const bool viaCommId = GENERATE(false, true);
  INFO((viaCommId ? "NCCL_COMM_ID" : "parent-made id"));
  RankOptions options = optionsLogging(logs, viaCommId ? IdMode::kEnvCommId : IdMode::kParent);
  if (viaCommId) {
    // The impostor claims rank 1 at rank 0's root before the real rank 1 arrives.
    options.parentTask = [](const RunContext& ctx) {
      gyre::WireAddress root{};
      parseLogged("127.0.0.1:" + std::to_string(ctx.commIdPort), &root);
      taskRecord("root's answer", forgeRankHello(root, 0x5eedf00dull, 1, 3));
    };
  }
  RunResult result = runRanks(
      3,
      [viaCommId](int rank, int n, const ncclUniqueId& id) {
        IdHead head;
        RANK_CHECK(readIdHead(id, &head), "rank %d: the unique id has no gyre magic", rank);
        if (viaCommId && rank == 1) usleep(1000000);
        if (!viaCommId && rank == 2) {
          // A well-formed hello claiming this very rank, one secret bit off.
          std::string answer = forgeRankHello(head.root, head.secret ^ 1, 2, n);
          RANK_CHECK(answer.rfind("status 1:", 0) == 0 && answer.find("secret") != std::string::npos,
                     "the root answered the impostor: %s", answer.c_str());
        }
        return joinSumAndLeave(id, rank, n);
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  if (viaCommId) {
    const std::string answer = result.taskRecords["root's answer"];
    INFO("root's answer to the impostor: " << answer);
    CHECK(answer.rfind("status 1:", 0) == 0);  // kRootRefused
    CHECK(answer.find("secret does not match") != std::string::npos);
  }
  const std::string claimed = viaCommId ? "refused rank 1 from" : "refused rank 2 from";
  INFO(logs.allText());
  CHECK(logs.linesWith({"NCCL WARN", claimed, "secret does not match"}).size() == 1);
}

TEST_CASE("a peer hello with a wrong secret is refused by a rank's listener, logged at WARN, "
          "and the communicator's send, receive and AllReduce still work",
          "[bootstrap][secret]") {
  LogDir logs;
  REQUIRE(logs.ok());
  const bool viaCommId = GENERATE(false, true);
  // "the unique id's secret": what a holder of the id (or, with NCCL_COMM_ID, anyone
  // who knows the address and job) could present; only the session secret may pass.
  const bool useIdSecret = GENERATE(false, true);
  INFO((viaCommId ? "NCCL_COMM_ID" : "parent-made id")
       << ", forged secret: " << (useIdSecret ? "the unique id's" : "a wrong one"));
  RankOptions options = optionsLogging(logs, viaCommId ? IdMode::kEnvCommId : IdMode::kParent);
  options.env.push_back({"NCCL_SHM_DISABLE", "1"});  // the socket transport accepts on the listener
  RunResult result = runRanks(
      2,
      [&logs, useIdSecret](int rank, int n, const ncclUniqueId& id) {
        IdHead head;
        RANK_CHECK(readIdHead(id, &head), "rank %d: the unique id has no gyre magic", rank);
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        int forged = -1;
        if (rank == 1) {
          // Rank 0 logged its listener at init; impersonate rank 1's send connection there.
          const std::string key = "bootstrap done: rank 0 of 2 listening on ";
          std::vector<std::string> lines = logs.linesWith({key});
          RANK_CHECK(lines.size() == 1, "found %zu lines with \"%s\"", lines.size(), key.c_str());
          gyre::WireAddress listener{};
          RANK_CHECK(parseLogged(lines[0].substr(lines[0].find(key) + key.size()), &listener),
                     "cannot parse the address in \"%s\"", lines[0].c_str());
          forged = connectBy(listener, monotonicSeconds() + 5);
          RANK_CHECK(forged >= 0, "could not connect to rank 0's listener");
          gyre::ConnHello hello{};
          memcpy(hello.magic, gyre::kConnHelloMagic, sizeof(hello.magic));
          hello.secret = useIdSecret ? head.secret : head.secret ^ 0x8000000000000001ull;
          hello.fromRank = 1;
          hello.tag = kP2PTransportTag;
          RANK_CHECK(sendBytes(forged, &hello, sizeof(hello)), "sending the forged hello failed");
        }
        // The forged connection is queued before rank 1 can take part in this
        // AllReduce, so rank 0's listener meets it before the real send connection.
        std::string why;
        RANK_CHECK(sumOfRanksIsRight(comm, rank, n, &why), "rank %d: %s", rank, why.c_str());
        std::vector<int32_t> data(1000);
        for (size_t i = 0; i < data.size(); ++i) data[i] = rank == 1 ? int32_t(i * 7 + 3) : -1;
        r = rank == 1 ? ncclSend(data.data(), data.size(), ncclInt32, 0, comm, nullptr)
                      : ncclRecv(data.data(), data.size(), ncclInt32, 1, comm, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: %s returned %d: %s", rank, rank ? "send" : "recv", int(r),
                   lastError().c_str());
        for (size_t i = 0; i < data.size(); ++i)
          RANK_CHECK(data[i] == int32_t(i * 7 + 3), "rank %d: element %zu is %d, sent %d", rank, i, data[i],
                     int32_t(i * 7 + 3));
        RANK_CHECK(sumOfRanksIsRight(comm, rank, n, &why), "rank %d after the send: %s", rank, why.c_str());
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        if (forged >= 0) close(forged);
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  INFO(logs.allText());
  CHECK(logs.linesWith({"[0] NCCL WARN", "refused a connection from", "claiming rank 1", "wrong session secret"})
            .size() == 1);
}

TEST_CASE("init with the unique id of a communicator already destroyed fails at once (long before "
          "GYRE_INIT_TIMEOUT) and says the id is stale",
          "[bootstrap][secret]") {
  // The root of an ncclGetUniqueId id listens before the id exists, so a
  // refused connection means it is gone: no reason to wait out the timeout.
  constexpr int kInitTimeout_s = 30;
  RankOptions options;
  options.timeout_s = 40;
  options.env = {{"GYRE_INIT_TIMEOUT", std::to_string(kInitTimeout_s)}, {"GYRE_TIMEOUT", "5"}};
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: first init returned %d: %s", rank, int(r), lastError().c_str());
        std::string why;
        RANK_CHECK(sumOfRanksIsRight(comm, rank, n, &why), "rank %d: %s", rank, why.c_str());
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        const double t0 = monotonicSeconds();
        r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        const double elapsed = monotonicSeconds() - t0;
        const std::string msg = lastError();
        RANK_CHECK(r != ncclSuccess, "rank %d: init with the used id succeeded", rank);
        RANK_CHECK(comm == nullptr, "rank %d: a failed init returned a communicator", rank);
        RANK_CHECK(elapsed < 5, "rank %d: init with the used id took %.2f s to fail (GYRE_INIT_TIMEOUT %d s)", rank,
                   elapsed, kInitTimeout_s);
        RANK_CHECK(r == ncclInvalidArgument, "rank %d: a stale id gave %d, not ncclInvalidArgument", rank, int(r));
        RANK_CHECK(containsNoCase(msg, "rendezvous") && containsNoCase(msg, "stale"),
                   "rank %d: error %d does not name the rendezvous and a stale id: \"%s\"", rank, int(r),
                   msg.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("with NCCL_COMM_ID a rank of another job (GYRE_JOB_ID) is refused by the rendezvous, told why, "
          "and the job's own ranks form the communicator",
          "[bootstrap][secret]") {
  // Four processes at one NCCL_COMM_ID: ranks 0-2 of job "new", and a leftover
  // "rank 2" of job "old" that arrives first. Without the job id in the secret the
  // root would take the leftover as rank 2 and fail the real one as a duplicate.
  LogDir logs;
  REQUIRE(logs.ok());
  RankOptions options = optionsLogging(logs, IdMode::kEnvCommId);
  options.rankEnv = [](int rank) -> std::vector<std::pair<std::string, std::optional<std::string>>> {
    return {{"GYRE_JOB_ID", rank == 3 ? "old" : "new"}};
  };
  RunResult result = runRanks(
      4,
      [](int rank, int, const ncclUniqueId& id) {
        const int n = 3;
        if (rank == 2) usleep(1000000);
        if (rank != 3) return joinSumAndLeave(id, rank, n);
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, 2, nullptr);
        const std::string msg = lastError();
        RANK_CHECK(r != ncclSuccess, "the other job's rank joined this job's communicator");
        RANK_CHECK(msg.find("secret does not match") != std::string::npos && msg.find("GYRE_JOB_ID=old") !=
                   std::string::npos, "error %d does not say the secret and job differ: \"%s\"", int(r),
                   msg.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  INFO(logs.allText());
  CHECK(logs.linesWith({"NCCL WARN", "refused rank 2 from", "secret does not match"}).size() == 1);
}
