// An external net plugin that misbehaves (the test plugin's fault switches,
// test_net_plugin.cc): a table with a required function left null fails init
// naming the function and the file; a plugin that fails sends mid-collective
// or never completes a send fails the call on every rank within GYRE_TIMEOUT,
// naming the network and the peer; ncclCommAbort then returns promptly and
// leaves none of the plugin's comms or listeners open.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "net_test_util.h"

namespace {

using namespace gyre::nettest;

using CountsFn = void (*)(long*, long*, long*, long*, long*, long*);

std::string pluginPath() {
  const char* p = getenv("NETTEST_PLUGIN");
  return p ? p : "";
}

// Init on 2 ranks with the plugin and `fault` set; the first rank's error text ("" if init succeeded).
std::string initErrorWith(const std::pair<std::string, std::string>& fault) {
  return initError({{"NCCL_NET_PLUGIN", pluginPath()}, {fault.first, fault.second}});
}

// 2 ranks run AllReduces through the plugin with `fault` set until one fails;
// each rank checks its error and that abort leaves nothing of the plugin's open.
// Every rank's error names the collective, the peer and contains each of `says`.
void expectEveryRankFailsThenAborts(const std::pair<std::string, std::string>& fault, int timeoutSeconds,
                                    const std::vector<std::string>& says) {
  const std::string plugin = pluginPath();
  REQUIRE(!plugin.empty());
  RankOptions options;
  options.timeout_s = 3 * timeoutSeconds + 30;
  options.env = {{"NCCL_SHM_DISABLE", "1"},
                 {"NCCL_NET_PLUGIN", plugin},
                 {"GYRE_TIMEOUT", std::to_string(timeoutSeconds)},
                 {"GYRE_INIT_TIMEOUT", "20"},
                 {"NCCL_BUFFSIZE", "262144"},
                 {fault.first, fault.second}};
  RunResult result = runRanks(
      2,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "init: %s",
                   lastError().c_str());
        std::vector<float> v(100000, 1.0f);
        const auto start = std::chrono::steady_clock::now();
        ncclResult_t r = ncclSuccess;
        int calls = 0;
        for (; calls < 1000 && r == ncclSuccess; ++calls)
          r = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat, ncclSum, comm, nullptr);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::string error = lastError();
        rankRecord("error", error);
        RANK_CHECK(r != ncclSuccess, "rank %d: %d AllReduces succeeded through the faulty plugin", rank, calls);
        RANK_CHECK(seconds < timeoutSeconds + 5, "rank %d: the failure took %.1f s (GYRE_TIMEOUT is %d s)", rank,
                   seconds, timeoutSeconds);
        RANK_CHECK(error.find("ncclAllReduce #") != std::string::npos &&
                       error.find("rank " + std::to_string(1 - rank)) != std::string::npos,
                   "rank %d: the error names neither the call nor the peer (rank %d): %s", rank, 1 - rank,
                   error.c_str());
        for (const std::string& part : says)
          RANK_CHECK(error.find(part) != std::string::npos, "rank %d: the error does not say \"%s\": %s", rank,
                     part.c_str(), error.c_str());
        const auto abortStart = std::chrono::steady_clock::now();
        r = ncclCommAbort(comm);
        const double abortSeconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - abortStart).count();
        RANK_CHECK(r == ncclSuccess, "abort returned %d: %s", int(r), lastError().c_str());
        RANK_CHECK(abortSeconds < timeoutSeconds, "abort took %.1f s", abortSeconds);
        void* lib = dlopen(plugin.c_str(), RTLD_NOW | RTLD_NOLOAD);
        RANK_CHECK(lib != nullptr, "the plugin was not loaded");
        auto counts = reinterpret_cast<CountsFn>(dlsym(lib, "gyretest_counts"));
        RANK_CHECK(counts != nullptr, "no gyretest_counts");
        long isends, irecvs, tests, open = 1, regs, deregs;
        counts(&isends, &irecvs, &tests, &open, &regs, &deregs);
        RANK_CHECK(open == 0, "rank %d: %ld plugin comms or listeners still open after abort", rank, open);
        RANK_CHECK(regs == deregs, "rank %d: %ld regMr, %ld deregMr after abort", rank, regs, deregs);
        dlclose(lib);
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

}  // namespace

TEST_CASE("a plugin table leaving isend or test null fails init naming the function and the file", "[fault]") {
  for (const char* function : {"isend", "test", "closeListen"}) {
    const std::string e = initErrorWith({"TESTNET_NULL_FUNCTION", function});
    INFO(e);
    CHECK(e.find(std::string("leaves ") + function + " null") != std::string::npos);
    CHECK(e.find(pluginPath()) != std::string::npos);
    CHECK(e.find("ncclNetPlugin_v12") != std::string::npos);
  }
}

TEST_CASE("a plugin failing sends mid-collective fails every rank within GYRE_TIMEOUT naming the network and a rank, "
          "and abort closes all it opened",
          "[fault]") {
  // The network's name and the plugin's own warning are the reason given.
  expectEveryRankFailsThenAborts({"TESTNET_FAIL_SENDS_AFTER", "40"}, 10,
                                 {"NET/GyreTest/0", "the network failed a send: gyretest: send failed"});
}

TEST_CASE("a send the plugin never completes fails every rank within GYRE_TIMEOUT, and abort closes all it opened",
          "[fault]") {
  expectEveryRankFailsThenAborts({"TESTNET_STALL_SENDS_AFTER", "40"}, 5, {"waited 5 s (GYRE_TIMEOUT)"});
}
