// Collectives on a communicator that init plans as several hosts. Each rank
// sets NCCL_HOSTID, so ranks {0, 2} form one "host" and {1, 3} another: the
// ranks exchange their host topologies, the ring search orders the ring host
// by host (0 2 1 3, not rank order), edges inside a host use shared memory and
// edges between hosts the socket transport, and the AllReduce trees are the
// double binary tree across hosts with a chain inside each. Every collective
// is checked against the reference (ring positions differ from rank numbers,
// which is what AllGather and ReduceScatter blocks and Broadcast/Reduce roots
// must survive), and the log proves the plan really was the topology's.
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

constexpr int kRanks = 4;

std::string logPath(int rank) { return "/tmp/gyre-multihost-test." + std::to_string(getppid()) + "." + std::to_string(rank); }

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Case {
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;
  int root;
  bool inPlace;
  uint64_t id;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const ncclDataType_t types[] = {ncclFloat32, ncclInt64, ncclFloat16, ncclUint8};
  const ncclRedOp_t ops[] = {ncclSum, ncclMax, ncclAvg, ncclMin};
  // 0, 1, primes, and counts spanning several 8 KiB chunks (NCCL_BUFFSIZE=64 KiB below).
  const size_t counts[] = {0, 1, 13, 127, 5003, 20011};
  uint64_t k = 0;
  for (size_t ti = 0; ti < 4; ++ti)
    for (size_t ci = 0; ci < 6; ++ci) {
      ncclRedOp_t op = ops[(ti + ci) % 4];
      out.push_back({types[ti], op, counts[ci], int((ti + ci) % kRanks), (ti + ci) % 2 == 1,
                     caseId(0x3057, {ti, ci, k++})});
    }
  return out;
}

bool checkAllReduce(ncclComm_t comm, int rank, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const std::string what = caseName("allreduce", c.type, opName(c.op), c.count, -1, c.inPlace, c.id);
  Inputs in = makeInputs(t, c.op, kRanks, c.id, c.count);
  std::vector<char> send(in.rank(rank), in.rank(rank) + c.count * t.size), recv(c.count * t.size + 1);
  void* out = c.inPlace ? send.data() : recv.data();
  if (!callOk(ncclAllReduce(send.data(), out, c.count, c.type, c.op, comm, nullptr), rank, what, "ncclAllReduce"))
    return false;
  std::string wrong = compareToReference(t, c.op, in.at(0, t.size), out, c.count);
  if (!wrong.empty()) caseFail("rank %d: %s: %s", rank, what.c_str(), wrong.c_str());
  rankRecord(what, hexHash(out, c.count * t.size));  // bitwise identical on every rank
  return true;
}

bool checkAllGather(ncclComm_t comm, int rank, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t bytes = c.count * t.size;
  const std::string what = caseName("allgather", c.type, nullptr, c.count, -1, c.inPlace, c.id);
  Inputs in = makeInputs(t, c.op, kRanks, c.id, c.count);
  std::vector<char> want, out(bytes * kRanks + 1), send(in.rank(rank), in.rank(rank) + bytes);
  for (int r = 0; r < kRanks; ++r) want.insert(want.end(), in.rank(r), in.rank(r) + bytes);
  if (c.inPlace && bytes) memcpy(out.data() + rank * bytes, in.rank(rank), bytes);
  const void* src = c.inPlace ? out.data() + rank * bytes : send.data();
  if (!callOk(ncclAllGather(src, out.data(), c.count, c.type, comm, nullptr), rank, what, "ncclAllGather"))
    return false;
  std::string wrong = compareExact(t, out.data(), want.data(), c.count * kRanks);
  if (!wrong.empty()) caseFail("rank %d: %s: %s", rank, what.c_str(), wrong.c_str());
  return true;
}

bool checkReduceScatter(ncclComm_t comm, int rank, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t bytes = c.count * t.size;
  const std::string what = caseName("reducescatter", c.type, opName(c.op), c.count, -1, c.inPlace, c.id);
  Inputs in = makeInputs(t, c.op, kRanks, c.id, c.count * kRanks);
  std::vector<char> send(in.rank(rank), in.rank(rank) + bytes * kRanks), recv(bytes + 1);
  void* out = c.inPlace ? send.data() + rank * bytes : recv.data();
  if (!callOk(ncclReduceScatter(send.data(), out, c.count, c.type, c.op, comm, nullptr), rank, what,
              "ncclReduceScatter"))
    return false;
  std::string wrong = compareToReference(t, c.op, in.at(size_t(rank) * c.count, t.size), out, c.count);
  if (!wrong.empty()) caseFail("rank %d: %s: %s", rank, what.c_str(), wrong.c_str());
  return true;
}

bool checkBroadcastReduce(ncclComm_t comm, int rank, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t bytes = c.count * t.size;
  Inputs in = makeInputs(t, c.op, kRanks, c.id, c.count);
  std::vector<char> send(in.rank(rank), in.rank(rank) + bytes), recv(bytes + 1);
  void* out = c.inPlace ? send.data() : recv.data();
  std::string what = caseName("broadcast", c.type, nullptr, c.count, c.root, c.inPlace, c.id);
  if (!callOk(ncclBroadcast(send.data(), out, c.count, c.type, c.root, comm, nullptr), rank, what, "ncclBroadcast"))
    return false;
  std::string wrong = compareExact(t, out, in.rank(c.root), c.count);
  if (!wrong.empty()) caseFail("rank %d: %s: %s", rank, what.c_str(), wrong.c_str());

  if (bytes) memcpy(send.data(), in.rank(rank), bytes);  // an empty vector's data() may be NULL
  what = caseName("reduce", c.type, opName(c.op), c.count, c.root, c.inPlace, c.id);
  if (!callOk(ncclReduce(send.data(), out, c.count, c.type, c.op, c.root, comm, nullptr), rank, what, "ncclReduce"))
    return false;
  if (rank == c.root) {
    wrong = compareToReference(t, c.op, in.at(0, t.size), out, c.count);
    if (!wrong.empty()) caseFail("rank %d: %s: %s", rank, what.c_str(), wrong.c_str());
  }
  return true;
}

RunConfig twoHostConfig(const char* algo) {
  RunConfig config;
  config.nranks = kRanks;
  config.buffSize = kSmallBuffSize;
  config.algo = algo;
  config.mode = IdMode::kEnvCommId;  // each rank reads its own NCCL_HOSTID at its first gyre call
  config.timeout_s = 90;
  config.rankEnv = [](int rank) {
    std::vector<std::pair<std::string, std::optional<std::string>>> env = {
        {"NCCL_HOSTID", rank % 2 == 0 ? "even-host" : "odd-host"},
        {"NCCL_DEBUG", "INFO"},
        {"NCCL_DEBUG_SUBSYS", "INIT,GRAPH,TUNING"},
        {"NCCL_DEBUG_FILE", logPath(rank)}};
    return env;
  };
  return config;
}

// What rank `rank`'s log must show about the plan.
int checkPlanLog(int rank) {
  std::string log = readFile(logPath(rank));
  unlink(logPath(rank).c_str());
  RANK_CHECK(!log.empty(), "rank %d: no log at %s", rank, logPath(rank).c_str());
  if (rank == 0) {
    RANK_CHECK(log.find("over 2 host(s)") != std::string::npos, "rank 0 did not plan 2 hosts:\n%s", log.c_str());
    RANK_CHECK(log.find("channel 0 ring: 0 2 1 3") != std::string::npos,
               "rank 0's ring does not visit the hosts in turn:\n%s", log.c_str());
    RANK_CHECK(log.find("TUNING") != std::string::npos, "no TUNING table in rank 0's log:\n%s", log.c_str());
  }
  // Ring 0 2 1 3: rank 0 sends to 2 (same host), rank 2 to 1 (the other host).
  if (rank == 0)
    RANK_CHECK(log.find("ring channel 0: 3 -> 0 -> 2 over shm") != std::string::npos,
               "rank 0 should reach rank 2 over shm:\n%s", log.c_str());
  if (rank == 2)
    RANK_CHECK(log.find("ring channel 0: 0 -> 2 -> 1 over socket") != std::string::npos,
               "rank 2 should reach rank 1 over the socket transport:\n%s", log.c_str());
  return 0;
}

void runTwoHosts(const char* algo, bool everything) {
  const std::vector<Case> all = cases();
  RunConfig config = twoHostConfig(algo);
  RunResult result = runOnComm(config, [&](int rank, int, ncclComm_t comm) {
    for (const Case& c : all) {
      rankProgress(caseName("case", c.type, opName(c.op), c.count, c.root, c.inPlace, c.id));
      if (!checkAllReduce(comm, rank, c)) return 1;
      if (!everything) continue;
      if (!checkAllGather(comm, rank, c) || !checkReduceScatter(comm, rank, c) ||
          !checkBroadcastReduce(comm, rank, c))
        return 1;
    }
    return checkPlanLog(rank);
  });
  checkRun(config, result, all.size(), true);
}

}  // namespace

TEST_CASE("every collective is correct on a ring the topology search ordered across two hosts",
          "[multihost][topology]") {
  runTwoHosts(nullptr, true);
}

TEST_CASE("AllReduce over the double binary tree across two hosts matches the reference",
          "[multihost][topology][tree]") {
  runTwoHosts("Tree", false);
}
