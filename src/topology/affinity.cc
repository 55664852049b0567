#include "src/topology/affinity.h"

#include <pthread.h>
#include <sched.h>

#include <fstream>
#include <string>

#include "src/config/env.h"
#include "src/debug/log.h"

namespace gyre::topo {
namespace {

// CPUs of a NUMA node from sysfs ("0-3,8-11"); false if the node is unknown.
bool numaCpus(int node, cpu_set_t* out) {
  std::ifstream f("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  std::string list;
  if (!(f >> list)) return false;
  CPU_ZERO(out);
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    std::string range = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = range.find('-');
    int lo = std::stoi(range.substr(0, dash));
    int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
    for (int c = lo; c <= hi && c < CPU_SETSIZE; ++c) CPU_SET(c, out);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return true;
}

int nodeOfCpu(int cpu) {
  for (int node = 0; node < 1024; ++node) {
    cpu_set_t set;
    if (!numaCpus(node, &set)) {
      if (node > 64) return -1;  // nodes may be sparse; stop after a long gap
      continue;
    }
    if (CPU_ISSET(cpu, &set)) return node;
  }
  return -1;
}

}  // namespace

int processNumaNode() {
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return -1;
  int node = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &mask)) continue;
    int n = nodeOfCpu(c);
    if (n < 0 || (node >= 0 && n != node)) return -1;
    node = n;
  }
  return node;
}

bool bindThreadToNuma(int numaNode) {
  if (numaNode < 0) return false;
  cpu_set_t want;
  if (!numaCpus(numaNode, &want)) return false;
  int64_t ignoreMask = 0;
  env::getInt("NCCL_IGNORE_CPU_AFFINITY", &ignoreMask);
  if (!ignoreMask) {
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return false;
    CPU_AND(&want, &want, &mask);
  }
  if (CPU_COUNT(&want) == 0) return false;
  if (pthread_setaffinity_np(pthread_self(), sizeof(want), &want) != 0) return false;
  GYRE_INFO("INIT", "thread bound to the %d CPU(s) of NUMA node %d%s", CPU_COUNT(&want), numaNode,
            ignoreMask ? " (NCCL_IGNORE_CPU_AFFINITY=1)" : "");
  return true;
}

}  // namespace gyre::topo
