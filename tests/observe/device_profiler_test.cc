// Profiler events of device communicators on the paths other than the
// collective kernels (src/device/launch_events.h), on the fake CUDA runtime
// with the recording plugin (test_profiler_plugin.cc, path in
// OBSERVE_PROFILER): self send/recv and one-rank collectives (copies on the
// stream), send/recv between ranks of one process (copy-engine copies
// between their streams), collectives of the direct executor for ranks of
// one process (its kernel), and calls staged through host memory. Each call
// gets one Coll or P2p event with its function, sizes, peer or sequence
// number and path, under its run's Group event, ended before the next
// call's group starts; a direct kernel gets a KernelLaunch event under the
// call's group API event and a KernelCh event per kernel, stopped with its
// KernelChStop state once the kernel is done. Calls captured into a CUDA
// graph report graphCaptured in their API events and get no Coll or P2p
// events. Every result is checked against values computed here.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fork_ranks.h"
#include "profiler_records.h"
#include "src/comm/comm.h"
#include "src/device/copy/copy_calls.h"
#include "src/device/device_comm.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"

using namespace gyre::test;

namespace {

// GroupApi, CollApi, P2pApi, Group, Coll, P2p, KernelLaunch, KernelCh.
constexpr int kMask = (1 << 8) | (1 << 9) | (1 << 10) | (1 << 0) | (1 << 1) | (1 << 2) | (1 << 11) | (1 << 6);
constexpr int kKernelChStop = 22;

std::string pluginPath() {
  const char* p = getenv("OBSERVE_PROFILER");
  return p ? p : "";
}

cudaStream_t fakeStream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

bool sync(cudaStream_t s) { return gyre::deviceRuntime()->streamSynchronize(s) == ncclSuccess; }

int32_t valueOf(int rank, int call, size_t i) { return int32_t(rank * 100003 + call * 7919 + int(i) * 13 + 1); }

uint64_t p2pPathCount(ncclComm_t comm, gyre::P2PPath path) {
  return comm->device->copies->calls[static_cast<int>(path)].load();
}

// Runs `body` in `nranks` forked processes with the plugin loaded and then
// records, per process, the plugin's lines (after every communicator was
// destroyed: body's job).
RunResult runWithPlugin(int nranks, std::vector<std::pair<std::string, std::optional<std::string>>> env,
                        const RankFn& body) {
  const std::string plugin = pluginPath();
  RankOptions options;
  options.timeout_s = 60;
  options.env = std::move(env);
  options.env.push_back({"NCCL_PROFILER_PLUGIN", plugin});
  options.env.push_back({"GYRETEST_PROFILER_MASK", std::to_string(kMask)});
  options.env.push_back({"GYRE_TIMEOUT", "10"});
  options.env.push_back({"GYRE_INIT_TIMEOUT", "10"});
  return runRanks(
      nranks,
      [body, plugin](int rank, int n, const ncclUniqueId& id) {
        if (int r = body(rank, n, id); r != 0) return r;
        void* lib = dlopen(plugin.c_str(), RTLD_NOW | RTLD_NOLOAD);
        RANK_CHECK(lib, "the profiler plugin %s was not loaded", plugin.c_str());
        auto logFn = reinterpret_cast<const char* (*)()>(dlsym(lib, "gyretest_profiler_log"));
        RANK_CHECK(logFn, "the test plugin lacks gyretest_profiler_log");
        rankRecordLines(logFn());
        return 0;
      },
      options);
}

// One process's events, and those of one rank among them in start order.
struct Recorded {
  std::map<int, Ev> events;
  std::vector<int> order;
  std::string text;  // for failure messages

  explicit Recorded(const RankOutcome& r) {
    std::vector<std::string> lines = recordedLines(r);
    for (const std::string& l : lines) text += l + "\n";
    events = parseEvents(lines, &order);
  }
  std::vector<const Ev*> of(const std::string& kind, int rank) const {
    std::vector<const Ev*> out;
    for (const Ev* e : ofKind(events, order, kind))
      if (e->fields.at("rank") == std::to_string(rank)) out.push_back(e);
    return out;
  }
  const Ev& at(int id) const { return events.at(id); }
};

// What holds for every event: started and stopped once, in that order,
// inside its parent's lifetime (a KernelCh event may outlive its Coll
// event, which stops once the call is enqueued); a Coll or P2p event hangs
// under a Group event of its rank (also its parentGroup) and stops before
// the next group or lone call's API event of the process starts.
void checkStructure(const Recorded& rec) {
  std::vector<int> apiGroups;
  for (int id : rec.order)
    if (rec.at(id).kind == "GroupApi") apiGroups.push_back(rec.at(id).startAt);
  for (const auto& [id, e] : rec.events) {
    INFO("event " << id << " " << e.kind);
    REQUIRE(e.startAt >= 0);
    CHECK(e.stops == 1);
    CHECK(e.stopAt > e.startAt);
    if (e.parent) {
      REQUIRE(rec.events.count(e.parent) == 1);
      const Ev& p = rec.at(e.parent);
      CHECK(p.startAt < e.startAt);
      if (e.kind != "KernelCh") CHECK(p.stopAt > e.stopAt);
      CHECK(p.fields.at("rank") == e.fields.at("rank"));
    }
    if (e.kind == "Coll" || e.kind == "P2p") {
      REQUIRE(e.parent != 0);
      CHECK(rec.at(e.parent).kind == "Group");
      CHECK(e.fields.at("group") == std::to_string(e.parent));
      for (int g : apiGroups)
        if (g > e.startAt) {
          CHECK(e.stopAt < g);
          break;
        }
    }
    if (e.kind == "KernelCh") {
      REQUIRE(e.states.size() == 1);
      CHECK(e.states[0].first == kKernelChStop);
      CHECK(e.fields.at("pTimer") == "0");
    }
  }
}

void checkP2p(const Ev& e, const char* func, size_t count, int peer) {
  INFO("P2p event " << e.id);
  CHECK(e.fields.at("func") == func);
  CHECK(e.fields.at("count") == std::to_string(count));
  CHECK(e.fields.at("datatype") == "ncclInt32");
  CHECK(e.fields.at("peer") == std::to_string(peer));
  CHECK(e.fields.at("nChannels") == "1");
}

}  // namespace

TEST_CASE("one rank's self send/recv get P2p events and its collectives Coll events of a copy; captured calls report "
          "graphCaptured and get none",
          "[observe][device]") {
  REQUIRE(!pluginPath().empty());
  constexpr int kRounds = 3;
  constexpr size_t kCount = 1031;
  RunResult result = runWithPlugin(1, {{"GYRE_FAKE_CUDA", "1"}}, [](int, int n, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    RANK_CHECK(ncclCommInitRank(&comm, n, id, 0) == ncclSuccess, "init: %s", lastError().c_str());
    std::vector<int32_t> send(kCount), recv(kCount), reduced(kCount);
    cudaStream_t s = fakeStream(31);
    for (int round = 0; round < kRounds; ++round) {
      for (size_t i = 0; i < kCount; ++i) send[i] = valueOf(0, round, i);
      RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
      RANK_CHECK(ncclSend(send.data(), kCount, ncclInt32, 0, comm, s) == ncclSuccess, "send: %s", lastError().c_str());
      RANK_CHECK(ncclRecv(recv.data(), kCount, ncclInt32, 0, comm, s) == ncclSuccess, "recv: %s", lastError().c_str());
      RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
      RANK_CHECK(ncclAllReduce(send.data(), reduced.data(), kCount, ncclInt32, ncclSum, comm, s) == ncclSuccess,
                 "allreduce: %s", lastError().c_str());
      RANK_CHECK(sync(s), "sync");
      for (size_t i = 0; i < kCount; ++i) {
        RANK_CHECK(recv[i] == valueOf(0, round, i), "round %d: received element %zu is %d", round, i, recv[i]);
        RANK_CHECK(reduced[i] == valueOf(0, round, i), "round %d: reduced element %zu is %d", round, i, reduced[i]);
      }
    }
    RANK_CHECK(p2pPathCount(comm, gyre::P2PPath::SelfCopy) == 2 * kRounds, "%llu self copies",
               (unsigned long long)p2pPathCount(comm, gyre::P2PPath::SelfCopy));
    // Captured: a lone AllReduce and a self send/recv group, replayed twice.
    gyre::FakeGraph graph;
    gyre::fakeBeginCapture(s, &graph);
    RANK_CHECK(ncclAllReduce(send.data(), reduced.data(), kCount, ncclInt32, ncclSum, comm, s) == ncclSuccess,
               "captured allreduce: %s", lastError().c_str());
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    RANK_CHECK(ncclSend(send.data(), kCount, ncclInt32, 0, comm, s) == ncclSuccess, "captured send: %s",
               lastError().c_str());
    RANK_CHECK(ncclRecv(recv.data(), kCount, ncclInt32, 0, comm, s) == ncclSuccess, "captured recv: %s",
               lastError().c_str());
    RANK_CHECK(ncclGroupEnd() == ncclSuccess, "captured group end: %s", lastError().c_str());
    RANK_CHECK(gyre::fakeEndCapture(s) == 0, "end capture: %s", lastError().c_str());
    for (int launch = 0; launch < 2; ++launch) {
      for (size_t i = 0; i < kCount; ++i) send[i] = valueOf(0, 10 + launch, i);
      gyre::fakeLaunchGraph(graph, s);
      RANK_CHECK(sync(s), "sync");
      for (size_t i = 0; i < kCount; ++i) {
        RANK_CHECK(recv[i] == valueOf(0, 10 + launch, i), "launch %d: received element %zu is %d", launch, i, recv[i]);
        RANK_CHECK(reduced[i] == valueOf(0, 10 + launch, i), "launch %d: reduced element %zu", launch, i);
      }
    }
    RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
    return 0;
  });
  INFO(result.describe());
  REQUIRE(result.allOk());
  Recorded rec(result.ranks[0]);
  INFO("plugin lines:\n" << rec.text.substr(0, 20000));
  checkStructure(rec);
  // Eager: per round a Send and a Recv to and from rank 0 under one Group,
  // then the AllReduce as a one-rank copy numbered 1, 2, 3. Captured: none.
  std::vector<const Ev*> p2ps = rec.of("P2p", 0), colls = rec.of("Coll", 0);
  REQUIRE(p2ps.size() == 2 * kRounds);
  REQUIRE(colls.size() == kRounds);
  CHECK(rec.of("KernelLaunch", 0).empty());
  CHECK(rec.of("KernelCh", 0).empty());
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    checkP2p(*p2ps[2 * round], "Send", kCount, 0);
    checkP2p(*p2ps[2 * round + 1], "Recv", kCount, 0);
    CHECK(p2ps[2 * round]->parent == p2ps[2 * round + 1]->parent);
    const Ev& c = *colls[round];
    CHECK(c.fields.at("func") == "AllReduce");
    CHECK(c.fields.at("seq") == std::to_string(round + 1));
    CHECK(c.fields.at("count") == std::to_string(kCount));
    CHECK(c.fields.at("algo") == "Copy");
    CHECK(c.fields.at("proto") == "Simple");
    CHECK(c.fields.at("nChannels") == "1");
    CHECK(p2ps[2 * round]->stopAt < c.startAt);
  }
  // API events: the eager calls' are not captured, the last three are.
  std::vector<const Ev*> groups = rec.of("GroupApi", 0);
  REQUIRE(groups.size() == 2 * kRounds + 2);
  for (size_t g = 0; g < groups.size(); ++g) {
    INFO("group API event " << g);
    CHECK(groups[g]->fields.at("captured") == (g >= 2 * kRounds ? "1" : "0"));
  }
  std::vector<const Ev*> p2pApis = rec.of("P2pApi", 0), collApis = rec.of("CollApi", 0);
  REQUIRE(p2pApis.size() == 2 * kRounds + 2);
  REQUIRE(collApis.size() == kRounds + 1);
  for (size_t k = 0; k < p2pApis.size(); ++k)
    CHECK(p2pApis[k]->fields.at("captured") == (k >= 2 * kRounds ? "1" : "0"));
  for (size_t k = 0; k < collApis.size(); ++k)
    CHECK(collApis[k]->fields.at("captured") == (k >= kRounds ? "1" : "0"));
  // Nothing below the API once capture began.
  const int captureStart = groups[2 * kRounds]->startAt;
  for (const char* kind : {"Group", "Coll", "P2p"})
    for (const Ev* e : rec.of(kind, 0)) CHECK(e->startAt < captureStart);
}

namespace {

constexpr int kPairRanks = 2;

// Ranks of this process on one fake GPU (ncclCommInitAll with a repeated device).
int initPair(ncclComm_t* comms) {
  int devs[kPairRanks] = {};
  RANK_CHECK(ncclCommInitAll(comms, kPairRanks, devs) == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
  return 0;
}

int destroyPair(ncclComm_t* comms) {
  for (int r = 0; r < kPairRanks; ++r)
    RANK_CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy rank %d: %s", r, lastError().c_str());
  return 0;
}

}  // namespace

TEST_CASE("send/recv between two ranks of one process get P2p events of the copy path", "[observe][device]") {
  REQUIRE(!pluginPath().empty());
  constexpr int kRounds = 2;
  constexpr size_t kCount = 997;
  RunResult result = runWithPlugin(1, {{"GYRE_FAKE_CUDA", "1"}}, [](int, int, const ncclUniqueId&) {
    ncclComm_t comms[kPairRanks] = {};
    if (initPair(comms) != 0) return 1;
    std::vector<std::vector<int32_t>> send(kPairRanks, std::vector<int32_t>(kCount)),
        recv(kPairRanks, std::vector<int32_t>(kCount));
    for (int round = 0; round < kRounds; ++round) {
      for (int r = 0; r < kPairRanks; ++r)
        for (size_t i = 0; i < kCount; ++i) send[r][i] = valueOf(r, round, i);
      RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
      for (int r = 0; r < kPairRanks; ++r) {
        const int peer = 1 - r;
        RANK_CHECK(ncclSend(send[r].data(), kCount, ncclInt32, peer, comms[r], fakeStream(40 + r)) == ncclSuccess,
                   "send: %s", lastError().c_str());
        RANK_CHECK(ncclRecv(recv[r].data(), kCount, ncclInt32, peer, comms[r], fakeStream(40 + r)) == ncclSuccess,
                   "recv: %s", lastError().c_str());
      }
      RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
      for (int r = 0; r < kPairRanks; ++r) {
        RANK_CHECK(sync(fakeStream(40 + r)), "sync");
        for (size_t i = 0; i < kCount; ++i)
          RANK_CHECK(recv[r][i] == valueOf(1 - r, round, i), "round %d rank %d element %zu: %d", round, r, i,
                     recv[r][i]);
      }
    }
    for (int r = 0; r < kPairRanks; ++r)
      RANK_CHECK(p2pPathCount(comms[r], gyre::P2PPath::ProcessCopy) == 2 * kRounds, "rank %d: %llu process copies",
                 r, (unsigned long long)p2pPathCount(comms[r], gyre::P2PPath::ProcessCopy));
    return destroyPair(comms);
  });
  INFO(result.describe());
  REQUIRE(result.allOk());
  Recorded rec(result.ranks[0]);
  INFO("plugin lines:\n" << rec.text.substr(0, 20000));
  checkStructure(rec);
  for (int r = 0; r < kPairRanks; ++r) {
    INFO("rank " << r);
    std::vector<const Ev*> p2ps = rec.of("P2p", r);
    REQUIRE(p2ps.size() == 2 * kRounds);
    CHECK(rec.of("Coll", r).empty());
    CHECK(rec.of("KernelLaunch", r).empty());
    for (int round = 0; round < kRounds; ++round) {
      checkP2p(*p2ps[2 * round], "Send", kCount, 1 - r);
      checkP2p(*p2ps[2 * round + 1], "Recv", kCount, 1 - r);
      CHECK(p2ps[2 * round]->parent == p2ps[2 * round + 1]->parent);
      if (round > 0) CHECK(p2ps[2 * round]->parent != p2ps[0]->parent);  // a Group event per group end
    }
  }
}

TEST_CASE("collectives of the direct executor for ranks of one process get Coll events, and the leader's direct "
          "kernels KernelLaunch and KernelCh events",
          "[observe][device]") {
  REQUIRE(!pluginPath().empty());
  constexpr int kRounds = 2;
  constexpr size_t kCount = 4099;
  RunResult result = runWithPlugin(1, {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_DEVICE_PATH", "direct"}},
                                   [](int, int, const ncclUniqueId&) {
    ncclComm_t comms[kPairRanks] = {};
    if (initPair(comms) != 0) return 1;
    for (int r = 0; r < kPairRanks; ++r)
      RANK_CHECK(comms[r]->device->direct != nullptr, "rank %d did not set up the direct executor", r);
    std::vector<std::vector<int32_t>> in(kPairRanks, std::vector<int32_t>(kCount)),
        sum(kPairRanks, std::vector<int32_t>(kCount)), gathered(kPairRanks, std::vector<int32_t>(kCount * kPairRanks));
    for (int round = 0; round < kRounds; ++round) {
      for (int r = 0; r < kPairRanks; ++r)
        for (size_t i = 0; i < kCount; ++i) in[r][i] = valueOf(r, round, i);
      RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
      for (int r = 0; r < kPairRanks; ++r) {
        RANK_CHECK(ncclAllReduce(in[r].data(), sum[r].data(), kCount, ncclInt32, ncclSum, comms[r],
                                 fakeStream(50 + r)) == ncclSuccess, "allreduce: %s", lastError().c_str());
        RANK_CHECK(ncclAllGather(in[r].data(), gathered[r].data(), kCount, ncclInt32, comms[r], fakeStream(50 + r)) ==
                   ncclSuccess, "allgather: %s", lastError().c_str());
      }
      RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
      for (int r = 0; r < kPairRanks; ++r) {
        RANK_CHECK(sync(fakeStream(50 + r)), "sync");
        for (size_t i = 0; i < kCount; ++i) {
          RANK_CHECK(sum[r][i] == valueOf(0, round, i) + valueOf(1, round, i), "round %d rank %d sum %zu: %d", round,
                     r, i, sum[r][i]);
          for (int b = 0; b < kPairRanks; ++b)
            RANK_CHECK(gathered[r][b * kCount + i] == valueOf(b, round, i), "round %d rank %d block %d element %zu",
                       round, r, b, i);
        }
      }
    }
    for (int r = 0; r < kPairRanks; ++r)
      RANK_CHECK(comms[r]->device->direct->callsRun.load() == 2 * kRounds, "rank %d ran %llu calls direct", r,
                 (unsigned long long)comms[r]->device->direct->callsRun.load());
    return destroyPair(comms);
  });
  INFO(result.describe());
  REQUIRE(result.allOk());
  Recorded rec(result.ranks[0]);
  INFO("plugin lines:\n" << rec.text.substr(0, 20000));
  checkStructure(rec);
  for (int r = 0; r < kPairRanks; ++r) {
    INFO("rank " << r);
    std::vector<const Ev*> colls = rec.of("Coll", r);
    REQUIRE(colls.size() == 2 * kRounds);
    CHECK(rec.of("P2p", r).empty());
    // Rank 0 runs every share (GYRE_DIRECT_LEADER's default): one kernel
    // for an AllReduce, one per rank for an AllGather; rank 1 runs none.
    std::vector<const Ev*> launches = rec.of("KernelLaunch", r);
    CHECK(launches.size() == (r == 0 ? size_t(kRounds * (1 + kPairRanks)) : 0u));
    for (const Ev* l : launches) {
      REQUIRE(l->parent != 0);
      CHECK(rec.at(l->parent).kind == "GroupApi");
      CHECK(l->fields.at("stream") == std::to_string(50 + r));
    }
    for (size_t k = 0; k < colls.size(); ++k) {
      const Ev& c = *colls[k];
      const bool allGather = k % 2 == 1;
      INFO("collective " << k);
      CHECK(c.fields.at("func") == (allGather ? "AllGather" : "AllReduce"));
      CHECK(c.fields.at("seq") == std::to_string(k + 1));
      CHECK(c.fields.at("count") == std::to_string(kCount));
      CHECK(c.fields.at("algo") == "DeviceDirect");
      CHECK(c.fields.at("proto") == "Simple");
      const int kernels = r == 0 ? (allGather ? kPairRanks : 1) : 0;
      CHECK(field(c, "nChannels") == std::max(kernels, 1));
      std::vector<const Ev*> channels = childrenOf(rec.events, rec.order, c.id, "KernelCh");
      REQUIRE(static_cast<int>(channels.size()) == kernels);
      for (int ch = 0; ch < kernels; ++ch) CHECK(field(*channels[ch], "channel") == ch);
      // Each round's kernels were done before the next round's calls began.
      if (k + 2 < colls.size())
        for (const Ev* ch : channels) CHECK(ch->stopAt < colls[k + 2]->startAt);
    }
  }
}

TEST_CASE("calls staged through host memory get Coll and P2p events", "[observe][device]") {
  REQUIRE(!pluginPath().empty());
  constexpr int kCalls = 2;
  constexpr size_t kCount = 1021;
  RunResult result = runWithPlugin(2, {{"GYRE_FAKE_CUDA", "2"}, {"GYRE_DEVICE_PATH", "staged"}},
                                   [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
    std::vector<int32_t> in(kCount), out(kCount), recv(kCount);
    const int peer = 1 - rank;
    for (int call = 0; call < kCalls; ++call) {
      for (size_t i = 0; i < kCount; ++i) in[i] = valueOf(rank, call, i);
      RANK_CHECK(ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, ncclSum, comm, nullptr) == ncclSuccess,
                 "allreduce: %s", lastError().c_str());
      for (size_t i = 0; i < kCount; ++i)
        RANK_CHECK(out[i] == valueOf(0, call, i) + valueOf(1, call, i), "call %d element %zu: %d", call, i, out[i]);
    }
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    RANK_CHECK(ncclSend(in.data(), kCount, ncclInt32, peer, comm, nullptr) == ncclSuccess, "send: %s",
               lastError().c_str());
    RANK_CHECK(ncclRecv(recv.data(), kCount, ncclInt32, peer, comm, nullptr) == ncclSuccess, "recv: %s",
               lastError().c_str());
    RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
    for (size_t i = 0; i < kCount; ++i)
      RANK_CHECK(recv[i] == valueOf(peer, kCalls - 1, i), "received element %zu: %d", i, recv[i]);
    RANK_CHECK(p2pPathCount(comm, gyre::P2PPath::Staged) == 2, "%llu send/recv staged",
               (unsigned long long)p2pPathCount(comm, gyre::P2PPath::Staged));
    RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
    return 0;
  });
  INFO(result.describe());
  REQUIRE(result.allOk());
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    Recorded rec(result.ranks[rank]);
    INFO("plugin lines:\n" << rec.text.substr(0, 20000));
    checkStructure(rec);
    std::vector<const Ev*> colls = rec.of("Coll", rank), p2ps = rec.of("P2p", rank);
    REQUIRE(colls.size() == kCalls);
    REQUIRE(p2ps.size() == 2);
    CHECK(rec.of("KernelLaunch", rank).empty());
    for (int call = 0; call < kCalls; ++call) {
      const Ev& c = *colls[call];
      CHECK(c.fields.at("func") == "AllReduce");
      CHECK(c.fields.at("seq") == std::to_string(call + 1));
      CHECK(c.fields.at("count") == std::to_string(kCount));
      CHECK(c.fields.at("datatype") == "ncclInt32");
      CHECK(c.fields.at("algo") == "Staged");
      CHECK(c.fields.at("proto") == "unknown");
      CHECK(c.fields.at("nChannels") == "1");
    }
    checkP2p(*p2ps[0], "Send", kCount, 1 - rank);
    checkP2p(*p2ps[1], "Recv", kCount, 1 - rank);
    CHECK(p2ps[0]->parent == p2ps[1]->parent);
    CHECK(p2ps[0]->parent != colls[kCalls - 1]->parent);
  }
}

TEST_CASE("processes sharing a GPU get Coll events of the direct executor and P2p events of CUDA IPC copies",
          "[observe][device]") {
  REQUIRE(!pluginPath().empty());
  constexpr int kCalls = 2;
  constexpr size_t kCount = 2053;
  RunResult result = runWithPlugin(2, {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_DEVICE_PATH", "direct"}},
                                   [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
    RANK_CHECK(comm->device->direct != nullptr, "rank %d did not set up the direct executor", rank);
    // cudaMalloc'd (the fake's): CUDA IPC shares these.
    void* buffers[3] = {};
    for (void*& b : buffers)
      RANK_CHECK(gyre::deviceRuntime()->deviceAlloc(kCount * sizeof(int32_t), &b) == ncclSuccess, "alloc");
    auto* in = static_cast<int32_t*>(buffers[0]);
    auto* out = static_cast<int32_t*>(buffers[1]);
    auto* recv = static_cast<int32_t*>(buffers[2]);
    cudaStream_t s = fakeStream(60);
    const int peer = 1 - rank;
    for (int call = 0; call < kCalls; ++call) {
      for (size_t i = 0; i < kCount; ++i) in[i] = valueOf(rank, call, i);
      RANK_CHECK(ncclAllReduce(in, out, kCount, ncclInt32, ncclSum, comm, s) == ncclSuccess, "allreduce: %s",
                 lastError().c_str());
      RANK_CHECK(sync(s), "sync");
      for (size_t i = 0; i < kCount; ++i)
        RANK_CHECK(out[i] == valueOf(0, call, i) + valueOf(1, call, i), "call %d element %zu: %d", call, i, out[i]);
    }
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    RANK_CHECK(ncclSend(in, kCount, ncclInt32, peer, comm, s) == ncclSuccess, "send: %s", lastError().c_str());
    RANK_CHECK(ncclRecv(recv, kCount, ncclInt32, peer, comm, s) == ncclSuccess, "recv: %s", lastError().c_str());
    RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
    RANK_CHECK(sync(s), "sync");
    for (size_t i = 0; i < kCount; ++i)
      RANK_CHECK(recv[i] == valueOf(peer, kCalls - 1, i), "received element %zu: %d", i, recv[i]);
    RANK_CHECK(comm->device->direct->callsRun.load() == kCalls, "%llu calls ran direct",
               (unsigned long long)comm->device->direct->callsRun.load());
    RANK_CHECK(p2pPathCount(comm, gyre::P2PPath::IpcCopy) == 2, "%llu IPC copies",
               (unsigned long long)p2pPathCount(comm, gyre::P2PPath::IpcCopy));
    RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
    for (void* b : buffers) gyre::deviceRuntime()->deviceFree(b);
    return 0;
  });
  INFO(result.describe());
  REQUIRE(result.allOk());
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    Recorded rec(result.ranks[rank]);
    INFO("plugin lines:\n" << rec.text.substr(0, 20000));
    checkStructure(rec);
    std::vector<const Ev*> colls = rec.of("Coll", rank), p2ps = rec.of("P2p", rank);
    REQUIRE(colls.size() == kCalls);
    REQUIRE(p2ps.size() == 2);
    // Rank 0 runs both ranks' shares of an AllReduce as one kernel.
    std::vector<const Ev*> launches = rec.of("KernelLaunch", rank);
    CHECK(launches.size() == (rank == 0 ? size_t(kCalls) : 0u));
    for (const Ev* l : launches) CHECK(rec.at(l->parent).kind == "GroupApi");
    for (int call = 0; call < kCalls; ++call) {
      const Ev& c = *colls[call];
      CHECK(c.fields.at("func") == "AllReduce");
      CHECK(c.fields.at("seq") == std::to_string(call + 1));
      CHECK(c.fields.at("count") == std::to_string(kCount));
      CHECK(c.fields.at("algo") == "DeviceDirect");
      CHECK(c.fields.at("nChannels") == "1");
      std::vector<const Ev*> channels = childrenOf(rec.events, rec.order, c.id, "KernelCh");
      CHECK(channels.size() == (rank == 0 ? 1u : 0u));
      if (call + 1 < kCalls)
        for (const Ev* ch : channels) CHECK(ch->stopAt < colls[call + 1]->startAt);
    }
    checkP2p(*p2ps[0], "Send", kCount, 1 - rank);
    checkP2p(*p2ps[1], "Recv", kCount, 1 - rank);
    CHECK(p2ps[0]->parent == p2ps[1]->parent);
  }
}
