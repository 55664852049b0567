// NCCL profiler plugins: the recording plugin (test_profiler_plugin.cc,
// path in OBSERVE_PROFILER) gets, on each of 2 host ranks running the
// scripted calls (call_script.h), one init and one finalize; a group API
// event per lone call and per group; a collective or point-to-point API
// event per call with its function, count and datatype; a group event per
// run of the executor and a collective event (sequence number, algorithm,
// protocol, channels) or point-to-point event (peer) per call that moved
// data; every event started once, stopped once, after its parent started
// and before its parent stopped. A missing plugin, one that exports no
// version gyre knows (OBSERVE_PROFILER_V99) and one whose init fails are
// warned about, naming them, and every call still runs correctly.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "call_script.h"
#include "fork_ranks.h"
#include "log_dir.h"
#include "profiler_records.h"

using namespace gyre::test;

namespace {

std::string envPath(const char* var) {
  const char* p = getenv(var);
  return p ? p : "";
}

struct RunOutput {
  RunResult result;
  std::vector<std::string> logs;  // gyre's log, as each rank sees it (all ranks' lines)
};

using Env = std::vector<std::pair<std::string, std::optional<std::string>>>;
using RankBody = std::function<bool(ncclComm_t comm, int rank, int nranks)>;

// Runs `body` on `nranks` host ranks with `env`; each rank records the
// plugin's lines (when `plugin` is loaded) and its init/finalize counts.
// `device`: device communicators (ncclCommInitRank; the env must select
// the fake CUDA runtime).
RunOutput runRecorded(int nranks, const Env& env, const std::string& plugin, const RankBody& body,
                      bool device = false) {
  LogDir logs;
  RankOptions options;
  options.timeout_s = 60;
  options.env = env;
  options.env.push_back({"NCCL_DEBUG", "INFO"});
  options.env.push_back({"NCCL_DEBUG_FILE", logs.pattern()});
  RunOutput out;
  out.result = runRanks(
      nranks,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        const ncclResult_t init = device ? ncclCommInitRank(&comm, n, id, rank)
                                         : gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(init == ncclSuccess, "init: %s", lastError().c_str());
        if (!body(comm, rank, n)) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        void* lib = plugin.empty() ? nullptr : dlopen(plugin.c_str(), RTLD_NOW | RTLD_NOLOAD);
        rankRecord("loaded", lib ? "yes" : "no");
        if (!lib) return 0;
        auto logFn = reinterpret_cast<const char* (*)()>(dlsym(lib, "gyretest_profiler_log"));
        auto countsFn = reinterpret_cast<void (*)(int*, int*)>(dlsym(lib, "gyretest_profiler_counts"));
        RANK_CHECK(logFn && countsFn, "the test plugin lacks its query functions");
        int inits = 0, finalizes = 0;
        countsFn(&inits, &finalizes);
        rankRecord("inits", std::to_string(inits));
        rankRecord("finalizes", std::to_string(finalizes));
        rankRecordLines(logFn());
        return 0;
      },
      options);
  // Ranks forked from a process that logged already share its log file.
  for (size_t r = 0; r < out.result.ranks.size(); ++r) out.logs.push_back(logs.allText());
  return out;
}

// The scripted calls (call_script.h) on 2 ranks.
RunOutput runScript(const Env& env, const std::string& plugin) {
  return runRecorded(2, env, plugin, [](ncclComm_t comm, int rank, int) { return runCallScript(comm, rank); });
}

}  // namespace

TEST_CASE("a profiler plugin receives API, group, collective and send/recv events of every call", "[observe]") {
  const std::string plugin = envPath("OBSERVE_PROFILER");
  REQUIRE(!plugin.empty());
  RunOutput run = runScript({{"NCCL_PROFILER_PLUGIN", plugin}}, plugin);
  INFO(run.result.describe());
  REQUIRE(run.result.allOk());
  std::string commId;
  for (int rank = 0; rank < 2; ++rank) {
    const RankOutcome& r = run.result.ranks[rank];
    REQUIRE(r.records.at("loaded") == "yes");
    CHECK(r.records.at("inits") == "1");
    CHECK(r.records.at("finalizes") == "1");
    std::vector<std::string> lines = recordedLines(r);
    std::string all;
    for (const std::string& l : lines) all += l + "\n";
    INFO("rank " << rank << " plugin lines:\n" << all);
    CHECK(all.find("error") == std::string::npos);
    // Init: same communicator id on both ranks, this rank, the logger works.
    std::smatch m;
    REQUIRE(std::regex_search(all, m, std::regex("init comm=([0-9a-f]{16}) nodes=1 ranks=2 rank=" +
                                                 std::to_string(rank) + " logger=1")));
    if (rank == 0) commId = m[1];
    else CHECK(m[1] == commId);
    CHECK(run.logs[rank].find("gyretest profiler: init for rank " + std::to_string(rank)) != std::string::npos);
    CHECK(lines.back() == "finalize");

    std::vector<int> order;
    std::map<int, Ev> events = parseEvents(lines, &order);
    // Each event started once and stopped once, after it started; a parent
    // starts before and stops after its children.
    for (const auto& [id, e] : events) {
      INFO("event " << id << " " << e.kind);
      REQUIRE(e.startAt >= 0);
      CHECK(e.stops == 1);
      CHECK(e.stopAt > e.startAt);
      CHECK(e.fields.at("rank") == std::to_string(rank));
      if (e.parent) {
        REQUIRE(events.count(e.parent) == 1);
        CHECK(events[e.parent].startAt < e.startAt);
        CHECK(events[e.parent].stopAt > e.stopAt);
      }
    }

    // API events: one per call, in call order, under a group API event
    // (depth 0 for a lone call, the group's own for the Send and Recv).
    std::vector<const Ev*> api;
    for (int id : order)
      if (events[id].kind == "CollApi" || events[id].kind == "P2pApi") api.push_back(&events[id]);
    REQUIRE(api.size() == script().size());
    int groupOfP2p = 0;
    for (size_t i = 0; i < api.size(); ++i) {
      const ScriptedCall& c = script()[i];
      const Ev& e = *api[i];
      INFO("call " << i << " " << c.api);
      CHECK(e.kind == (c.p2p ? "P2pApi" : "CollApi"));
      CHECK(e.fields.at("func") == c.func);
      CHECK(e.fields.at("count") == std::to_string(c.count));
      CHECK(e.fields.at("datatype") == std::string(c.type == ncclInt32 ? "ncclInt32" : c.type == ncclFloat32
                                                                                          ? "ncclFloat32"
                                                                                          : "ncclFloat64"));
      if (!c.p2p && c.root >= 0) CHECK(e.fields.at("root") == std::to_string(c.root));
      REQUIRE(e.parent != 0);
      const Ev& g = events[e.parent];
      CHECK(g.kind == "GroupApi");
      CHECK(g.fields.at("depth") == (c.grouped ? "1" : "0"));
      CHECK(g.fields.at("captured") == "0");
      if (c.grouped) {
        if (groupOfP2p) CHECK(e.parent == groupOfP2p);
        groupOfP2p = e.parent;
      }
    }
    CHECK(ofKind(events, order, "GroupApi").size() == script().size() - 1);  // the Send and Recv share one
    CHECK(all.find("state " + std::to_string(groupOfP2p) + " 24") != std::string::npos);  // group end API start

    // Executed collectives: sequence numbers 1, 2, ... in call order, each
    // under a Group event; zero-count calls move nothing and have none.
    std::vector<const ScriptedCall*> ran, ranP2p;
    for (const ScriptedCall& c : script())
      if (c.count > 0) (c.p2p ? ranP2p : ran).push_back(&c);
    std::vector<const Ev*> colls = ofKind(events, order, "Coll");
    REQUIRE(colls.size() == ran.size());
    for (size_t i = 0; i < colls.size(); ++i) {
      const Ev& e = *colls[i];
      INFO("collective " << i << " " << ran[i]->api);
      CHECK(e.fields.at("func") == ran[i]->func);
      CHECK(e.fields.at("seq") == std::to_string(i + 1));
      CHECK(e.fields.at("count") == std::to_string(ran[i]->count));
      CHECK(e.fields.at("datatype") == "ncclInt32");
      if (ran[i]->root >= 0) CHECK(e.fields.at("root") == std::to_string(ran[i]->root));
      CHECK(std::regex_match(e.fields.at("algo"), std::regex("Ring|Tree|Direct|Doubling|SingleCopy")));
      CHECK(std::regex_match(e.fields.at("proto"), std::regex("Simple|LL")));
      CHECK(std::stoi(e.fields.at("nChannels")) >= 1);
      REQUIRE(e.parent != 0);
      CHECK(events[e.parent].kind == "Group");
      CHECK(e.fields.at("group") == std::to_string(e.parent));
    }
    std::vector<const Ev*> p2ps = ofKind(events, order, "P2p");
    REQUIRE(p2ps.size() == ranP2p.size());
    for (size_t i = 0; i < p2ps.size(); ++i) {
      const Ev& e = *p2ps[i];
      CHECK(e.fields.at("func") == ranP2p[i]->func);
      CHECK(e.fields.at("count") == "11");
      CHECK(e.fields.at("datatype") == "ncclFloat64");
      CHECK(e.fields.at("peer") == std::to_string(1 - rank));
      REQUIRE(e.parent != 0);
      CHECK(events[e.parent].kind == "Group");
    }
    // The Send and the Recv ran in one executor run: one Group event.
    if (p2ps.size() == 2) CHECK(p2ps[0]->parent == p2ps[1]->parent);
  }
}

TEST_CASE("a missing, unknown-version or failing profiler plugin is warned about and the calls run", "[observe]") {
  SECTION("missing") {
    RunOutput run = runScript({{"NCCL_PROFILER_PLUGIN", "/nonexistent/libnccl-profiler-gone.so"}}, "");
    INFO(run.result.describe());
    REQUIRE(run.result.allOk());
    for (const std::string& log : run.logs) {
      INFO(log.substr(0, 3000));
      CHECK(log.find("NCCL_PROFILER_PLUGIN=/nonexistent/libnccl-profiler-gone.so: the profiler plugin could not be "
                     "loaded") != std::string::npos);
    }
  }
  SECTION("a version gyre does not drive") {
    const std::string v99 = envPath("OBSERVE_PROFILER_V99");
    REQUIRE(!v99.empty());
    RunOutput run = runScript({{"NCCL_PROFILER_PLUGIN", v99}}, v99);
    INFO(run.result.describe());
    REQUIRE(run.result.allOk());
    for (const std::string& log : run.logs) {
      INFO(log.substr(0, 3000));
      CHECK(log.find("profiler plugin " + v99 + " exports neither ncclProfiler_v6 nor _v5") != std::string::npos);
    }
  }
  SECTION("init fails") {
    const std::string plugin = envPath("OBSERVE_PROFILER");
    RunOutput run = runScript({{"NCCL_PROFILER_PLUGIN", plugin}, {"GYRETEST_PROFILER_INIT_FAIL", "1"}}, plugin);
    INFO(run.result.describe());
    REQUIRE(run.result.allOk());
    for (int rank = 0; rank < 2; ++rank) {
      const RankOutcome& r = run.result.ranks[rank];
      INFO(run.logs[rank].substr(0, 3000));
      CHECK(run.logs[rank].find("profiler plugin " + plugin + ": init for rank " + std::to_string(rank)) !=
            std::string::npos);
      REQUIRE(r.records.at("loaded") == "yes");
      CHECK(r.records.at("inits") == "0");
      CHECK(r.records.at("finalizes") == "0");
      CHECK(r.records.at("lines") == "0");
    }
  }
}

namespace {

constexpr size_t kRingCount = 1009;  // int32 elements of the AllReduce (a prime: uneven slices)
constexpr size_t kP2pCount = 37;     // doubles each rank sends to the next

int32_t valueOf(int rank, size_t i) { return static_cast<int32_t>((i * 2654435761u + rank * 40503u) % 100003u) - 50000; }

constexpr int kRingCalls = 2;  // the second repeats the first's plan and lanes

// Ring AllReduces, then a group sending to the next rank and receiving
// from the previous one; the results checked against sums computed here.
bool ringCalls(ncclComm_t comm, int rank, int n) {
  std::vector<int32_t> in(kRingCount), out(kRingCount, 0);
  for (int call = 0; call < kRingCalls; ++call) {
    for (size_t i = 0; i < kRingCount; ++i) in[i] = valueOf(rank + call, i);
    RANK_CHECK(ncclAllReduce(in.data(), out.data(), kRingCount, ncclInt32, ncclSum, comm, nullptr) == ncclSuccess,
               "allreduce: %s", lastError().c_str());
    for (size_t i = 0; i < kRingCount; ++i) {
      int64_t sum = 0;
      for (int r = 0; r < n; ++r) sum += valueOf(r + call, i);
      RANK_CHECK(out[i] == sum, "allreduce element %zu: %d, expected %lld", i, out[i], static_cast<long long>(sum));
    }
  }
  std::vector<double> sendBuf(kP2pCount), recvBuf(kP2pCount, -1);
  for (size_t i = 0; i < kP2pCount; ++i) sendBuf[i] = rank * 1000.0 + i;
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  RANK_CHECK(ncclSend(sendBuf.data(), kP2pCount, ncclFloat64, next, comm, nullptr) == ncclSuccess, "send: %s",
             lastError().c_str());
  RANK_CHECK(ncclRecv(recvBuf.data(), kP2pCount, ncclFloat64, prev, comm, nullptr) == ncclSuccess, "recv: %s",
             lastError().c_str());
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
  for (size_t i = 0; i < kP2pCount; ++i)
    RANK_CHECK(recvBuf[i] == prev * 1000.0 + i, "recv element %zu: %g", i, recvBuf[i]);
  return true;
}


// The bytes a ProxyStep event reported (with its last state), or -1.
int64_t stepBytes(const Ev& step) {
  for (auto it = step.states.rbegin(); it != step.states.rend(); ++it)
    if (it->second.rfind(" bytes=", 0) == 0) return std::stoll(it->second.substr(7));
  return -1;
}

}  // namespace

TEST_CASE("a profiler plugin receives a ProxyOp per lane connection and a ProxyStep per chunk of the schedule",
          "[observe]") {
  const std::string plugin = envPath("OBSERVE_PROFILER");
  REQUIRE(!plugin.empty());
  const int mask = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4);  // Group, Coll, P2p, ProxyOp, ProxyStep
  for (int n : {2, 3, 4}) {
    DYNAMIC_SECTION(n << " ranks") {
      RunOutput run = runRecorded(n,
                                  {{"NCCL_PROFILER_PLUGIN", plugin},
                                   {"GYRETEST_PROFILER_MASK", std::to_string(mask)},
                                   {"NCCL_ALGO", "Ring"},
                                   {"NCCL_PROTO", "Simple"}},
                                  plugin, ringCalls);
      INFO(run.result.describe());
      REQUIRE(run.result.allOk());
      // Per channel, each rank's send peer and receive peer (cross-checked
      // below: a ring's edges seen from both ends).
      std::vector<std::map<int, int>> sendPeer(n), recvPeer(n);
      int64_t sentBytes = 0, receivedBytes = 0;
      for (int rank = 0; rank < n; ++rank) {
        std::vector<std::string> lines = recordedLines(run.result.ranks[rank]);
        std::string all;
        for (const std::string& l : lines) all += l + "\n";
        INFO("rank " << rank << " plugin lines:\n" << all.substr(0, 20000));
        std::vector<int> order;
        std::map<int, Ev> events = parseEvents(lines, &order);
        for (const auto& [id, e] : events) {
          INFO("event " << id << " " << e.kind);
          REQUIRE(e.startAt >= 0);
          CHECK(e.stops == 1);
          CHECK(e.stopAt > e.startAt);
          if (e.parent) {
            REQUIRE(events.count(e.parent) == 1);
            CHECK(events[e.parent].startAt < e.startAt);
            CHECK(events[e.parent].stopAt > e.stopAt);
          }
          if (e.kind == "ProxyOp") CHECK((events[e.parent].kind == "Coll" || events[e.parent].kind == "P2p"));
          if (e.kind == "ProxyStep") CHECK(events[e.parent].kind == "ProxyOp");
        }
        std::vector<const Ev*> colls = ofKind(events, order, "Coll");
        REQUIRE(colls.size() == static_cast<size_t>(kRingCalls));
        for (const Ev* collEv : colls) {
          const Ev& coll = *collEv;
          INFO("collective " << coll.fields.at("seq"));
          CHECK(coll.fields.at("algo") == "Ring");
          const int channels = static_cast<int>(field(coll, "nChannels"));
          std::vector<const Ev*> ops = childrenOf(events, order, coll.id, "ProxyOp");
          // Every channel sends to one peer and receives from one, the same
          // number of chunks each way: 2(n-1) per piece of the channel's slice
          // (n-1 to reduce, n-1 to pass the sums on).
          CHECK(static_cast<int>(ops.size()) == 2 * channels);
          std::map<int, int64_t> sendSteps, recvSteps;
          for (const Ev* op : ops) {
            INFO("ProxyOp " << op->id);
            const int channel = static_cast<int>(field(*op, "channel"));
            const bool isSend = field(*op, "isSend") == 1;
            const int peer = static_cast<int>(field(*op, "peer"));
            CHECK(channel < channels);
            CHECK(peer != rank);
            CHECK((peer >= 0 && peer < n));
            CHECK(field(*op, "pid") > 0);
            const int64_t nSteps = field(*op, "nSteps");
            CHECK(nSteps > 0);
            CHECK(nSteps % (2 * (n - 1)) == 0);
            (isSend ? sendPeer : recvPeer)[rank][channel] = peer;
            (isSend ? sendSteps : recvSteps)[channel] = nSteps;
            std::vector<const Ev*> steps = childrenOf(events, order, op->id, "ProxyStep");
            REQUIRE(static_cast<int64_t>(steps.size()) == nSteps);
            int64_t opBytes = 0;
            for (size_t k = 0; k < steps.size(); ++k) {
              CHECK(field(*steps[k], "step") == static_cast<int64_t>(k));
              if (k > 0) CHECK(steps[k - 1]->stopAt < steps[k]->startAt);  // one chunk after the other
              const int64_t b = stepBytes(*steps[k]);
              CHECK(b > 0);
              CHECK(b <= field(*op, "chunkSize"));
              opBytes += b;
            }
            (isSend ? sentBytes : receivedBytes) += opBytes;
          }
          for (const auto& [channel, steps] : sendSteps) CHECK(recvSteps[channel] == steps);
        }
        // Send/recv: one ProxyOp each, to the next rank and from the
        // previous, carrying the whole message.
        std::vector<const Ev*> p2ps = ofKind(events, order, "P2p");
        REQUIRE(p2ps.size() == 2);
        for (const Ev* p : p2ps) {
          const bool isSend = p->fields.at("func") == "Send";
          std::vector<const Ev*> pops = childrenOf(events, order, p->id, "ProxyOp");
          REQUIRE(pops.size() == 1);
          CHECK(field(*pops[0], "isSend") == (isSend ? 1 : 0));
          CHECK(field(*pops[0], "peer") == (isSend ? (rank + 1) % n : (rank + n - 1) % n));
          int64_t bytes = 0;
          for (const Ev* st : childrenOf(events, order, pops[0]->id, "ProxyStep")) bytes += stepBytes(*st);
          CHECK(bytes == static_cast<int64_t>(kP2pCount * sizeof(double)));
        }
      }
      // A ring AllReduce sends every element n-1 times to reduce it and
      // n-1 times to share the sum: over all ranks, 2(n-1) times the message
      // per call.
      CHECK(sentBytes == static_cast<int64_t>(kRingCalls * 2 * (n - 1) * kRingCount * sizeof(int32_t)));
      CHECK(receivedBytes == sentBytes);
      for (int r = 0; r < n; ++r)
        for (const auto& [channel, peer] : sendPeer[r]) {
          INFO("rank " << r << " channel " << channel << " sends to " << peer);
          CHECK(recvPeer[peer][channel] == r);
        }
    }
  }
}

namespace {

constexpr int kDeviceCalls = 3;

// AllReduces of device buffers (ncclMemAlloc'd; the fake runtime's device
// memory is host memory, and GYRE_FAKE_CUDA=2 makes each call wait for its
// stream), each checked.
bool deviceCalls(ncclComm_t comm, int rank, int n) {
  void* in = nullptr;
  void* out = nullptr;
  RANK_CHECK(ncclMemAlloc(&in, kRingCount * sizeof(int32_t)) == ncclSuccess, "ncclMemAlloc: %s", lastError().c_str());
  RANK_CHECK(ncclMemAlloc(&out, kRingCount * sizeof(int32_t)) == ncclSuccess, "ncclMemAlloc: %s", lastError().c_str());
  auto* src = static_cast<int32_t*>(in);
  auto* dst = static_cast<int32_t*>(out);
  for (int call = 0; call < kDeviceCalls; ++call) {
    for (size_t i = 0; i < kRingCount; ++i) src[i] = valueOf(rank + call, i);
    RANK_CHECK(ncclAllReduce(in, out, kRingCount, ncclInt32, ncclSum, comm, nullptr) == ncclSuccess,
               "allreduce: %s", lastError().c_str());
    for (size_t i = 0; i < kRingCount; ++i) {
      int64_t sum = 0;
      for (int r = 0; r < n; ++r) sum += valueOf(r + call, i);
      RANK_CHECK(dst[i] == sum, "call %d element %zu: %d, expected %lld", call, i, dst[i], static_cast<long long>(sum));
    }
  }
  ncclMemFree(in);
  ncclMemFree(out);
  return true;
}

}  // namespace

TEST_CASE("a profiler plugin receives KernelLaunch, collective and KernelCh events of device kernels", "[observe]") {
  const std::string plugin = envPath("OBSERVE_PROFILER");
  REQUIRE(!plugin.empty());
  // GroupApi, CollApi, Group, Coll, KernelCh, KernelLaunch.
  const int mask = (1 << 8) | (1 << 9) | (1 << 0) | (1 << 1) | (1 << 6) | (1 << 11);
  for (int n : {2, 3}) {
    DYNAMIC_SECTION(n << " ranks on the fake device") {
      RunOutput run = runRecorded(n,
                                  {{"NCCL_PROFILER_PLUGIN", plugin},
                                   {"GYRETEST_PROFILER_MASK", std::to_string(mask)},
                                   {"GYRE_FAKE_CUDA", "2"},
                                   {"GYRE_DEVICE_PATH", "kernels"},
                                   {"GYRE_TIMEOUT", "20"}},
                                  plugin, deviceCalls, /*device=*/true);
      INFO(run.result.describe());
      REQUIRE(run.result.allOk());
      for (int rank = 0; rank < n; ++rank) {
        std::vector<std::string> lines = recordedLines(run.result.ranks[rank]);
        std::string all;
        for (const std::string& l : lines) all += l + "\n";
        INFO("rank " << rank << " plugin lines:\n" << all.substr(0, 20000));
        CHECK(all.find("error") == std::string::npos);
        std::vector<int> order;
        std::map<int, Ev> events = parseEvents(lines, &order);
        for (const auto& [id, e] : events) {
          INFO("event " << id << " " << e.kind);
          REQUIRE(e.startAt >= 0);
          CHECK(e.stops == 1);
          CHECK(e.stopAt > e.startAt);
          if (e.parent) {
            REQUIRE(events.count(e.parent) == 1);
            CHECK(events[e.parent].startAt < e.startAt);
            // A KernelCh event ends when the kernel does, which may be after
            // its Coll event (stopped once the call is enqueued, as NCCL does).
            if (e.kind != "KernelCh") CHECK(events[e.parent].stopAt > e.stopAt);
          }
        }
        // One launch per call, under the call's group API event; one Coll
        // event per call with its sequence number, one KernelCh event per
        // lane, each stopped with its KernelChStop state.
        std::vector<const Ev*> launches = ofKind(events, order, "KernelLaunch");
        std::vector<const Ev*> colls = ofKind(events, order, "Coll");
        REQUIRE(launches.size() == static_cast<size_t>(kDeviceCalls));
        REQUIRE(colls.size() == static_cast<size_t>(kDeviceCalls));
        for (int c = 0; c < kDeviceCalls; ++c) {
          INFO("call " << c);
          REQUIRE(launches[c]->parent != 0);
          CHECK(events[launches[c]->parent].kind == "GroupApi");
          CHECK(std::stoull(launches[c]->fields.at("stream")) == 0);
          const Ev& coll = *colls[c];
          CHECK(coll.fields.at("func") == "AllReduce");
          CHECK(coll.fields.at("seq") == std::to_string(c + 1));
          CHECK(coll.fields.at("count") == std::to_string(kRingCount));
          CHECK(coll.fields.at("algo") == "unknown");
          CHECK(std::regex_match(coll.fields.at("proto"), std::regex("Simple|LL")));
          REQUIRE(coll.parent != 0);
          CHECK(events[coll.parent].kind == "Group");
          std::vector<const Ev*> channels = childrenOf(events, order, coll.id, "KernelCh");
          CHECK(static_cast<int64_t>(channels.size()) == field(coll, "nChannels"));
          CHECK(!channels.empty());
          for (const Ev* ch : channels) {
            CHECK(ch->fields.at("pTimer") == "0");
            REQUIRE(ch->states.size() == 1);
            CHECK(ch->states[0].first == 22);
            CHECK(ch->states[0].second == " pTimer=0");
          }
          // The kernel of call c ended before call c+1's launch: the fake
          // runtime waits for the stream in each call (GYRE_FAKE_CUDA=2).
          if (c + 1 < kDeviceCalls)
            for (const Ev* ch : channels) CHECK(ch->stopAt < launches[c + 1]->startAt);
        }
      }
    }
  }
}

namespace {

// The scripted calls, then AllReduces and AllGathers of buffers the peers
// map (gyreMemAllocHost: the single-copy paths), each checked.
bool scriptAndSharedBuffers(ncclComm_t comm, int rank, int n) {
  if (!runCallScript(comm, rank)) return false;
  const size_t count = 4099;
  void* in = nullptr;
  void* out = nullptr;
  RANK_CHECK(gyreMemAllocHost(&in, count * n * sizeof(int32_t)) == ncclSuccess, "alloc: %s", lastError().c_str());
  RANK_CHECK(gyreMemAllocHost(&out, count * n * sizeof(int32_t)) == ncclSuccess, "alloc: %s", lastError().c_str());
  auto* src = static_cast<int32_t*>(in);
  auto* dst = static_cast<int32_t*>(out);
  for (int call = 0; call < 2; ++call) {
    for (size_t i = 0; i < count; ++i) src[i] = valueOf(rank + call, i);
    RANK_CHECK(ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, nullptr) == ncclSuccess, "allreduce: %s",
               lastError().c_str());
    for (size_t i = 0; i < count; ++i) {
      int64_t sum = 0;
      for (int r = 0; r < n; ++r) sum += valueOf(r + call, i);
      RANK_CHECK(dst[i] == sum, "allreduce %d element %zu: %d, expected %lld", call, i, dst[i],
                 static_cast<long long>(sum));
    }
    RANK_CHECK(ncclAllGather(in, out, count, ncclInt32, comm, nullptr) == ncclSuccess, "allgather: %s",
               lastError().c_str());
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        RANK_CHECK(dst[r * count + i] == valueOf(r + call, i), "allgather block %d element %zu", r, i);
  }
  gyreMemFreeHost(in);
  gyreMemFreeHost(out);
  return true;
}

}  // namespace

TEST_CASE("every path's ProxyOp events have as many ProxySteps as they announce, in order", "[observe]") {
  const std::string plugin = envPath("OBSERVE_PROFILER");
  REQUIRE(!plugin.empty());
  const int mask = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4);  // Group, Coll, P2p, ProxyOp, ProxyStep
  RunOutput run = runRecorded(2, {{"NCCL_PROFILER_PLUGIN", plugin}, {"GYRETEST_PROFILER_MASK", std::to_string(mask)}},
                              plugin, scriptAndSharedBuffers);
  INFO(run.result.describe());
  REQUIRE(run.result.allOk());
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> lines = recordedLines(run.result.ranks[rank]);
    std::vector<int> order;
    std::map<int, Ev> events = parseEvents(lines, &order);
    std::set<std::string> algos;
    int ops = 0;
    for (const auto& [id, e] : events) {
      INFO("rank " << rank << " event " << id << " " << e.kind);
      CHECK(e.stops == 1);
      if (e.kind == "Coll") algos.insert(e.fields.at("algo"));
      if (e.kind != "ProxyOp") continue;
      ++ops;
      const Ev& parent = events[e.parent];
      CHECK((parent.kind == "Coll" || parent.kind == "P2p"));
      CHECK(parent.stopAt > e.stopAt);
      CHECK(field(e, "peer") == 1 - rank);
      std::vector<const Ev*> steps = childrenOf(events, order, id, "ProxyStep");
      REQUIRE(static_cast<int64_t>(steps.size()) == field(e, "nSteps"));
      for (size_t k = 0; k < steps.size(); ++k) {
        CHECK(field(*steps[k], "step") == static_cast<int64_t>(k));
        CHECK(steps[k]->stopAt < e.stopAt);
        CHECK(stepBytes(*steps[k]) >= 0);
        CHECK(stepBytes(*steps[k]) <= field(e, "chunkSize"));
      }
    }
    std::string seen;
    for (const std::string& a : algos) seen += a + " ";
    INFO("paths seen: " << seen);
    CHECK(ops > 0);
    CHECK(algos.size() >= 2);  // the script's small calls and the shared buffers' take different paths
  }
}
