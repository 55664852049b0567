// External NCCL net plugins: the test plugin (test_net_plugin.cc, path in
// NETTEST_PLUGIN, exporting ncclNetPlugin_v8 to _v12 as real plugins do;
// builds exporting fewer tables in NETTEST_PLUGIN_V10/_V9/_V8/_V13) carries
// every collective between 2 and 3 ranks with shared memory off, through
// the newest table it exports; its call counters prove the data went
// through it, and after ncclCommDestroy every comm it opened is closed with
// no request in flight. A plugin exporting only an unknown version fails
// init naming the file and the symbols gyre looked for. A plugin that is
// missing, fails init, or a NCCL_NET naming no network fails init with an
// error naming the variable and what exists. NCCL_DEBUG=INFO names the
// network of each connection.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>

#include <string>

#include "net_test_util.h"

namespace {

using namespace gyre::nettest;

std::string pluginPath(const char* var = "NETTEST_PLUGIN") {
  const char* p = getenv(var);
  return p ? p : "";
}

using CountsFn = void (*)(long*, long*, long*, long*, long*, long*);
using VersionFn = void (*)(int*, int*, int*);
using CloseFaultsFn = void (*)(long*, long*);

// NCCL's lookup order for net plugins, newest first (NCCL_NET_PLUGIN_SYMBOL of each version).
constexpr const char* kLookedFor =
    "looked for ncclNetPlugin_v12, ncclNetPlugin_v11, ncclNetPlugin_v10, ncclNetPlugin_v9, ncclNetPlugin_v8";

// `plugin` exports ncclNetPlugin_v8 up to _v<newest>; gyre must use v<newest>.
void expectCollectivesThroughPlugin(int nranks, const std::string& plugin, int newest) {
  REQUIRE(!plugin.empty());
  const std::string logDir = "/tmp/gyre_net_plugin_" + std::to_string(getpid());
  REQUIRE(system(("rm -rf " + logDir + " && mkdir -p " + logDir).c_str()) == 0);
  RankOptions options;
  options.timeout_s = 60;
  options.env = {{"NCCL_SHM_DISABLE", "1"},         {"NCCL_NET_PLUGIN", plugin},
                 {"GYRE_TIMEOUT", "20"},            {"GYRE_INIT_TIMEOUT", "20"},
                 {"NCCL_BUFFSIZE", "262144"},       {"NCCL_DEBUG", "INFO"},
                 {"NCCL_DEBUG_SUBSYS", "INIT,NET"}, {"NCCL_DEBUG_FILE", logDir + "/log.%p"}};
  RunResult result = runRanks(
      nranks,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        rankProgress("init");
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        for (size_t count : netCounts()) {
          rankProgress("count " + std::to_string(count));
          if (!checkEveryCollective(comm, rank, n, count)) return 1;
        }
        void* lib = dlopen(plugin.c_str(), RTLD_NOW | RTLD_NOLOAD);
        RANK_CHECK(lib != nullptr, "rank %d: the plugin %s was not loaded by gyre", rank, plugin.c_str());
        auto counts = reinterpret_cast<CountsFn>(dlsym(lib, "gyretest_counts"));
        RANK_CHECK(counts != nullptr, "no gyretest_counts");
        auto version = reinterpret_cast<VersionFn>(dlsym(lib, "gyretest_version"));
        RANK_CHECK(version != nullptr, "no gyretest_version");
        int used = 0, sawProfiler = 0, trafficClass = 0;
        version(&used, &sawProfiler, &trafficClass);
        RANK_CHECK(used == newest, "rank %d: gyre initialized ncclNet_v%d of a plugin exporting up to v%d", rank,
                   used, newest);
        if (newest >= 10) {
          RANK_CHECK(sawProfiler, "rank %d: v%d init() got no profiler callback", rank, newest);
          RANK_CHECK(trafficClass == -1, "rank %d: v%d got trafficClass %d, not undefined (-1)", rank, newest,
                     trafficClass);
        }
        auto closeFaults = reinterpret_cast<CloseFaultsFn>(dlsym(lib, "gyretest_close_faults"));
        RANK_CHECK(closeFaults != nullptr, "no gyretest_close_faults");
        long inflightAtClose = 0, contextErrors = 0;
        long isends, irecvs, tests, open, regs, deregs;
        counts(&isends, &irecvs, &tests, &open, &regs, &deregs);
        // Two messages per step and at least one step per collective call.
        RANK_CHECK(isends >= 12 && irecvs >= 12 && tests > 0, "rank %d: plugin calls: %ld isend, %ld irecv, %ld test",
                   rank, isends, irecvs, tests);
        r = ncclCommDestroy(comm);
        RANK_CHECK(r == ncclSuccess, "rank %d: destroy returned %d: %s", rank, int(r), lastError().c_str());
        counts(&isends, &irecvs, &tests, &open, &regs, &deregs);
        RANK_CHECK(open == 0, "rank %d: %ld plugin comms or listeners still open after destroy", rank, open);
        RANK_CHECK(regs == deregs && regs > 0, "rank %d: %ld regMr, %ld deregMr", rank, regs, deregs);
        closeFaults(&inflightAtClose, &contextErrors);
        RANK_CHECK(inflightAtClose == 0, "rank %d: the plugin closed comms with %ld request(s) still in flight",
                   rank, inflightAtClose);
        RANK_CHECK(contextErrors == 0, "rank %d: %ld listen()/connect() calls without init()'s context", rank,
                   contextErrors);
        dlclose(lib);
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  // Every rank's log names the plugin's network for its connections.
  std::string all;
  for (const std::string& f : filesIn(logDir)) all += readFile(f);
  INFO(all.substr(0, 4000));
  CHECK(all.find("via NET/GyreTest/0") != std::string::npos);
  CHECK(all.find("via NET/GyreTest/1") != std::string::npos);  // channel 1 on the plugin's second device
  CHECK(all.find("via NET/Socket") == std::string::npos);
  CHECK(all.find("(ncclNetPlugin_v" + std::to_string(newest) + ",") != std::string::npos);  // the loader's INFO line
  CHECK(all.find("in flight") == std::string::npos);  // neither gyre nor the plugin saw a request left at close
  if (all.find("via NET/GyreTest/0") != std::string::npos) (void)system(("rm -rf " + logDir).c_str());
}

}  // namespace

TEST_CASE("every collective over 2 ranks runs through the ncclNetPlugin_v12 table of a plugin exporting v8 to v12",
          "[plugin]") {
  expectCollectivesThroughPlugin(2, pluginPath(), 12);
}

TEST_CASE("every collective over 3 ranks runs through an external ncclNetPlugin_v12 plugin and closes what it opened",
          "[plugin]") {
  expectCollectivesThroughPlugin(3, pluginPath(), 12);
}

TEST_CASE("every collective over 2 ranks runs through the ncclNetPlugin_v10 table of a plugin exporting v8 to v10",
          "[plugin]") {
  expectCollectivesThroughPlugin(2, pluginPath("NETTEST_PLUGIN_V10"), 10);
}

TEST_CASE("every collective over 2 ranks runs through the ncclNetPlugin_v9 table of a plugin exporting v8 and v9",
          "[plugin]") {
  expectCollectivesThroughPlugin(2, pluginPath("NETTEST_PLUGIN_V9"), 9);
}

TEST_CASE("every collective over 2 ranks runs through a plugin exporting only ncclNetPlugin_v8", "[plugin]") {
  expectCollectivesThroughPlugin(2, pluginPath("NETTEST_PLUGIN_V8"), 8);
}

// The dynamic loader reads LD_LIBRARY_PATH when a process starts, so the
// cases that need a library on the path run this binary again with `dir`
// on it, selecting one hidden test case by its tag; true if that passed.
bool passesWithLibraryPath(const std::string& dir, const std::string& tag) {
  const char* old = getenv("LD_LIBRARY_PATH");
  std::string path = dir;
  if (old) path.append(":").append(old);
  // -w NoTests: a tag that selects nothing fails instead of passing.
  const std::string cmd =
      "LD_LIBRARY_PATH='" + path + "' /proc/" + std::to_string(getpid()) + "/exe -w NoTests '" + tag + "'";
  return system(cmd.c_str()) == 0;
}

// A folder holding only `link` -> the test plugin.
std::string folderWithPlugin(const std::string& link) {
  const std::string dir = "/tmp/gyre_net_path_" + std::to_string(getpid());
  REQUIRE(system(("rm -rf " + dir + " && mkdir -p " + dir + " && ln -s " + pluginPath() + " " + dir + "/" + link)
                     .c_str()) == 0);
  return dir;
}

TEST_CASE("run with libnccl-net-gyretestpath.so on the library path", "[.plugin-by-name]") {
  CHECK(initError({{"NCCL_NET_PLUGIN", "gyretestpath"}, {"NCCL_NET", "GyreTest"}}) == "");
}

TEST_CASE("run with libnccl-net.so on the library path", "[.default-plugin]") {
  CHECK(initError({{"NCCL_NET_PLUGIN", std::nullopt}, {"NCCL_NET", "GyreTest"}}) == "");
}

TEST_CASE("NCCL_NET_PLUGIN=NAME loads libnccl-net-NAME.so from the library path, as NCCL does", "[plugin]") {
  const std::string dir = folderWithPlugin("libnccl-net-gyretestpath.so");
  CHECK(passesWithLibraryPath(dir, "[.plugin-by-name]"));
  (void)system(("rm -rf " + dir).c_str());
}

TEST_CASE("with NCCL_NET_PLUGIN unset, libnccl-net.so on the library path is loaded, as NCCL does", "[plugin]") {
  const std::string dir = folderWithPlugin("libnccl-net.so");
  CHECK(passesWithLibraryPath(dir, "[.default-plugin]"));
  (void)system(("rm -rf " + dir).c_str());
  // Without one on the path there is no plugin network, and no error either.
  const std::string e = initError({{"NCCL_NET_PLUGIN", std::nullopt}, {"NCCL_NET", "GyreTest"}});
  CHECK(e.find("NCCL_NET=GyreTest: no such network") != std::string::npos);
  CHECK(initError({{"NCCL_NET_PLUGIN", std::nullopt}}) == "");
}

TEST_CASE("a step larger than a v12 plugin's maxP2pBytes fails init naming the limit", "[plugin]") {
  const std::string e =
      initError({{"NCCL_NET_PLUGIN", pluginPath()}, {"NCCL_BUFFSIZE", "262144"}, {"TESTNET_MAX_P2P", "4096"}});
  INFO(e);
  CHECK(e.find("exceed the 4096 bytes the network takes in one message (its maxP2pBytes)") != std::string::npos);
}

TEST_CASE("ncclCommDestroy stays local while the peer still runs collectives, and its connections close clean later",
          "[plugin]") {
  const std::string plugin = pluginPath();
  RankOptions options;
  options.timeout_s = 60;
  options.idCount = 2;
  options.env = {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET_PLUGIN", plugin}, {"GYRE_TIMEOUT", "20"},
                 {"GYRE_INIT_TIMEOUT", "20"}, {"NCCL_BUFFSIZE", "262144"}};
  RunResult result = runRanks(
      2,
      [&](int rank, int n, const ncclUniqueId&) {
        ncclComm_t first = nullptr, second = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&first, n, rankIds()[0], rank, nullptr) == ncclSuccess, "init: %s",
                   lastError().c_str());
        RANK_CHECK(gyreCommInitRankHost(&second, n, rankIds()[1], rank, nullptr) == ncclSuccess, "init: %s",
                   lastError().c_str());
        if (!checkEveryCollective(first, rank, n, 1000)) return 1;
        // Rank 0 destroys `first` before an AllReduce on `second`, rank 1
        // after it: a destroy that waited for the peer's would stall both.
        std::vector<float> v(1000, 1.0f);
        const auto start = std::chrono::steady_clock::now();
        auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
        if (rank == 0) RANK_CHECK(ncclCommDestroy(first) == ncclSuccess, "destroy: %s", lastError().c_str());
        rankRecord("destroyed first", std::to_string(since()));
        RANK_CHECK(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat, ncclSum, second, nullptr) == ncclSuccess,
                   "allreduce: %s", lastError().c_str());
        rankRecord("allreduce done", std::to_string(since()));
        RANK_CHECK(v[0] == 2.0f, "allreduce gave %f", v[0]);
        if (rank == 1) RANK_CHECK(ncclCommDestroy(first) == ncclSuccess, "destroy: %s", lastError().c_str());
        const double seconds = since();
        RANK_CHECK(seconds < 10, "destroy and AllReduce took %.1f s (GYRE_TIMEOUT is 20 s)", seconds);
        RANK_CHECK(ncclCommDestroy(second) == ncclSuccess, "destroy: %s", lastError().c_str());
        // What the peer closed late is released in the background: wait for it.
        void* lib = dlopen(plugin.c_str(), RTLD_NOW | RTLD_NOLOAD);
        RANK_CHECK(lib != nullptr, "the plugin was not loaded");
        auto closeFaults = reinterpret_cast<CloseFaultsFn>(dlsym(lib, "gyretest_close_faults"));
        auto counts = reinterpret_cast<CountsFn>(dlsym(lib, "gyretest_counts"));
        RANK_CHECK(closeFaults && counts, "the plugin's test entry points are missing");
        long inflightAtClose = 0, contextErrors = 0, isends, irecvs, tests, open = 1, regs, deregs;
        for (int i = 0; i < 1000 && open != 0; ++i) {
          counts(&isends, &irecvs, &tests, &open, &regs, &deregs);
          if (open != 0) usleep(10000);
        }
        closeFaults(&inflightAtClose, &contextErrors);
        RANK_CHECK(open == 0, "%ld plugin comms or listeners still open 10 s after destroy", open);
        RANK_CHECK(inflightAtClose == 0, "the plugin closed comms with %ld request(s) in flight", inflightAtClose);
        dlclose(lib);
        return 0;
      },
      options);
  INFO(result.describe());
  std::string phases;
  for (const RankOutcome& o : result.ranks)
    for (const auto& [k, v] : o.records) phases += "rank " + std::to_string(o.rank) + " " + k + " at " + v + " s; ";
  INFO(phases);
  CHECK(result.allOk());
}

TEST_CASE("after ncclCommAbort with a dead peer the plugin holds no request of gyre's at close", "[plugin]") {
  const std::string plugin = pluginPath();
  RankOptions options;
  options.timeout_s = 60;
  options.env = {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET_PLUGIN", plugin}, {"GYRE_TIMEOUT", "20"},
                 {"GYRE_INIT_TIMEOUT", "20"}, {"NCCL_BUFFSIZE", "262144"}};
  RunResult result = runRanks(
      2,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        if (!checkEveryCollective(comm, rank, n, 1000)) return 1;
        if (rank == 1) _exit(0);  // dies with its receives posted and its connections open
        sleep(1);
        const auto start = std::chrono::steady_clock::now();
        r = ncclCommAbort(comm);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        RANK_CHECK(r == ncclSuccess, "abort returned %d: %s", int(r), lastError().c_str());
        RANK_CHECK(seconds < 20, "abort took %.1f s, not within GYRE_TIMEOUT (20 s)", seconds);
        void* lib = dlopen(plugin.c_str(), RTLD_NOW | RTLD_NOLOAD);
        RANK_CHECK(lib != nullptr, "the plugin was not loaded");
        auto closeFaults = reinterpret_cast<CloseFaultsFn>(dlsym(lib, "gyretest_close_faults"));
        auto counts = reinterpret_cast<CountsFn>(dlsym(lib, "gyretest_counts"));
        RANK_CHECK(closeFaults && counts, "the plugin's test entry points are missing");
        long inflightAtClose = 0, contextErrors = 0, isends, irecvs, tests, open, regs, deregs;
        closeFaults(&inflightAtClose, &contextErrors);
        counts(&isends, &irecvs, &tests, &open, &regs, &deregs);
        RANK_CHECK(inflightAtClose == 0, "the plugin closed comms with %ld request(s) in flight", inflightAtClose);
        RANK_CHECK(open == 0, "%ld plugin comms or listeners still open after abort", open);
        dlclose(lib);
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.ranks[0].ok());
}

TEST_CASE("NCCL_NET naming no network fails init listing the networks that exist", "[plugin]") {
  const std::string e = initError({{"NCCL_NET", "Bogus"}});
  INFO(e);
  CHECK(e.find("NCCL_NET=Bogus") != std::string::npos);
  CHECK(e.find("Socket") != std::string::npos);
}

TEST_CASE("NCCL_NET names the plugin's network case-insensitively", "[plugin]") {
  CHECK(initError({{"NCCL_NET", "gyretest"}, {"NCCL_NET_PLUGIN", pluginPath()}}) == "");
}

TEST_CASE("a missing plugin fails init naming NCCL_NET_PLUGIN and the file", "[plugin]") {
  const std::string e = initError({{"NCCL_NET_PLUGIN", "nosuchthing"}});
  INFO(e);
  CHECK(e.find("NCCL_NET_PLUGIN=nosuchthing") != std::string::npos);
  CHECK(e.find("libnccl-net-nosuchthing.so") != std::string::npos);
}

TEST_CASE("a plugin whose init fails fails init with the plugin's own warning", "[plugin]") {
  const std::string e = initError({{"NCCL_NET_PLUGIN", pluginPath()}, {"TESTNET_FAIL_INIT", "1"}});
  INFO(e);
  CHECK(e.find("GyreTest") != std::string::npos);
  CHECK(e.find("init refused") != std::string::npos);
}

TEST_CASE("a plugin's TRACE lines reach the log at NCCL_DEBUG=TRACE only, its WARN lines at every level",
          "[plugin]") {
  const std::string logDir = "/tmp/gyre_net_plugin_log_" + std::to_string(getpid());
  auto logAt = [&](const char* level, bool failInit) {
    REQUIRE(system(("rm -rf " + logDir + " && mkdir -p " + logDir).c_str()) == 0);
    (void)initError({{"NCCL_NET_PLUGIN", pluginPath()}, {"NCCL_DEBUG", level}, {"NCCL_DEBUG_SUBSYS", "NET"},
                     {"TESTNET_FAIL_INIT", failInit ? "1" : "0"}, {"NCCL_DEBUG_FILE", logDir + "/log.%p"}});
    std::string all;
    for (const std::string& f : filesIn(logDir)) all += readFile(f);
    return all;
  };
  const std::string trace = logAt("TRACE", false);
  CHECK(trace.find("gyretest: init traced") != std::string::npos);
  const std::string info = logAt("INFO", false);
  CHECK(info.find("net plugin") != std::string::npos);  // the INFO lines are there
  CHECK(info.find("gyretest: init traced") == std::string::npos);
  const std::string warn = logAt("WARN", true);
  CHECK(warn.find("gyretest: init refused") != std::string::npos);
  (void)system(("rm -rf " + logDir).c_str());
}

TEST_CASE("a library that exports no ncclNet table fails init naming the versions gyre looked for", "[plugin]") {
  // libgyre itself exports no ncclNet_vN.
  const char* self = getenv("NETTEST_LIBGYRE");
  REQUIRE(self != nullptr);
  const std::string e = initError({{"NCCL_NET_PLUGIN", std::string(self)}});
  INFO(e);
  CHECK(e.find("exports no ncclNet version gyre supports") != std::string::npos);
  CHECK(e.find(kLookedFor) != std::string::npos);
  CHECK(e.find("it exports no ncclNetPlugin_vN") != std::string::npos);
}

TEST_CASE("a plugin exporting only an unknown ncclNet version fails init naming it and the versions looked for",
          "[plugin]") {
  const std::string plugin = pluginPath("NETTEST_PLUGIN_V13");
  REQUIRE(!plugin.empty());
  const std::string e = initError({{"NCCL_NET_PLUGIN", plugin}});
  INFO(e);
  CHECK(e.find("NCCL_NET_PLUGIN=" + plugin) != std::string::npos);
  CHECK(e.find(kLookedFor) != std::string::npos);
  CHECK(e.find("it exports ncclNetPlugin_v13") != std::string::npos);
}

TEST_CASE("NCCL_NET=Socket carries every collective over 3 ranks and the log names NET/Socket/0 per connection",
          "[socket]") {
  const std::string logDir = "/tmp/gyre_net_socket_" + std::to_string(getpid());
  REQUIRE(system(("rm -rf " + logDir + " && mkdir -p " + logDir).c_str()) == 0);
  RankOptions options;
  options.timeout_s = 60;
  options.env = {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET", "socket"},          {"GYRE_TIMEOUT", "20"},
                 {"NCCL_BUFFSIZE", "262144"}, {"NCCL_DEBUG", "INFO"},          {"NCCL_DEBUG_SUBSYS", "INIT"},
                 {"NCCL_DEBUG_FILE", logDir + "/log.%p"}};
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        for (size_t count : netCounts()) {
          rankProgress("count " + std::to_string(count));
          if (!checkEveryCollective(comm, rank, n, count)) return 1;
        }
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  std::string all;
  for (const std::string& f : filesIn(logDir)) all += readFile(f);
  INFO(all.substr(0, 3000));
  CHECK(all.find("via NET/Socket/0") != std::string::npos);
  CHECK(all.find("via SHM") == std::string::npos);
  (void)system(("rm -rf " + logDir).c_str());
}
