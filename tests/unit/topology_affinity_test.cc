// Placing a host rank on its NUMA node and binding helper threads near their device.
#include <pthread.h>
#include <sched.h>

#include <fstream>
#include <string>
#include <thread>

#include "src/config/env.h"
#include "src/topology/affinity.h"
#include "tests/unit/topology_fixtures.h"

using namespace gyre;

namespace {

// Runs bindThreadToNuma in a fresh thread and returns (result, CPUs it may run on).
std::pair<bool, int> bindInThread(int node) {
  std::pair<bool, int> out;
  std::thread t([&] {
    out.first = topo::bindThreadToNuma(node);
    cpu_set_t set;
    pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
    out.second = CPU_COUNT(&set);
  });
  t.join();
  return out;
}

bool haveNumaSysfs() { return access("/sys/devices/system/node/node0/cpulist", R_OK) == 0; }

}  // namespace

TEST_CASE("the process's NUMA node is the one holding all its CPUs") {
  if (!haveNumaSysfs()) {
    WARN("no /sys/devices/system/node on this machine: NUMA placement not testable");
    CHECK(topo::processNumaNode() == -1);
    return;
  }
  int node = topo::processNumaNode();
  // Either every allowed CPU is on one node, or the mask spans several (-1).
  CHECK(node >= -1);
  cpu_set_t mask;
  REQUIRE(sched_getaffinity(0, sizeof(mask), &mask) == 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) {
      CPU_SET(c, &one);
      break;
    }
  // Restricted to one CPU, the process sits on that CPU's node.
  REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  int single = topo::processNumaNode();
  sched_setaffinity(0, sizeof(mask), &mask);
  CHECK(single >= 0);
}

TEST_CASE("helper threads bind to the CPUs of a node, and an unknown node changes nothing") {
  if (!haveNumaSysfs()) return;
  auto [bound, cpus] = bindInThread(0);
  CHECK(bound);
  CHECK(cpus >= 1);
  auto [unknown, all] = bindInThread(4095);
  CHECK_FALSE(unknown);
  CHECK(all >= cpus);
  CHECK_FALSE(bindInThread(-1).first);
}

TEST_CASE("NCCL_IGNORE_CPU_AFFINITY=1 binds to the whole node even outside the process mask") {
  if (!haveNumaSysfs()) return;
  cpu_set_t mask, one;
  REQUIRE(sched_getaffinity(0, sizeof(mask), &mask) == 0);
  if (CPU_COUNT(&mask) < 2) return;  // needs a node with 2+ CPUs to tell the two apart
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) {
      CPU_SET(c, &one);
      break;
    }
  REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);  // new threads inherit one CPU
  int node = topo::processNumaNode();
  unsetenv("NCCL_IGNORE_CPU_AFFINITY");
  env::reloadForTesting("/nonexistent");
  auto respecting = bindInThread(node);
  setenv("NCCL_IGNORE_CPU_AFFINITY", "1", 1);
  env::reloadForTesting("/nonexistent");
  auto ignoring = bindInThread(node);
  unsetenv("NCCL_IGNORE_CPU_AFFINITY");
  env::reloadForTesting("/nonexistent");
  sched_setaffinity(0, sizeof(mask), &mask);
  CHECK(respecting.first);
  CHECK(respecting.second == 1);  // the mask's CPU on that node
  CHECK(ignoring.first);
  std::ifstream list("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  std::string cpus;
  list >> cpus;
  bool nodeHasSeveral = cpus.find_first_of("-,") != std::string::npos;
  if (nodeHasSeveral) CHECK(ignoring.second > respecting.second);  // every CPU of the node
}
