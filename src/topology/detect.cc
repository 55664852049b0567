#include "src/topology/detect.h"

#include <unistd.h>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/topology/xml.h"

namespace gyre::topo {
namespace {

// Socket interconnect bandwidths when nothing better is known: NUMA nodes of
// one package share the on-die fabric; packages talk over UPI/xGMI, where a
// copy through a remote host bridge reaches about 20 GB/s on current servers.
constexpr double kSamePackageBw = 40.0;
constexpr double kCrossPackageBw = 20.0;

void connectCpus(Topology* t) {
  for (const Link& l : t->links)
    if (l.type == LinkType::Smp) return;
  std::vector<int> cpus = t->ofKind(NodeKind::Cpu);
  for (size_t i = 0; i < cpus.size(); ++i)
    for (size_t j = i + 1; j < cpus.size(); ++j) {
      const Node& a = t->nodes[cpus[i]];
      const Node& b = t->nodes[cpus[j]];
      bool same = a.package >= 0 && a.package == b.package;
      t->addLink(cpus[i], cpus[j], LinkType::Smp, same ? kSamePackageBw : kCrossPackageBw);
    }
}

}  // namespace

ncclResult_t detectTopology(Topology* out) {
  detect::State s;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  s.topo.host = host;
  if (!detect::fromHwloc(&s)) detect::cpusFromSysfs(&s);
  if (s.topo.ofKind(NodeKind::Cpu).empty()) {
    Node cpu;
    cpu.kind = NodeKind::Cpu;
    cpu.index = 0;
    cpu.id = "cpu0";
    cpu.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    s.topo.addNode(std::move(cpu));
  }
  for (int c : s.topo.ofKind(NodeKind::Cpu))
    if (s.topo.nodes[c].memBw <= 0) s.topo.nodes[c].memBw = 20.0;
  connectCpus(&s.topo);
  detect::nicsFromSysfs(&s);
  detect::gpusFromCuda(&s);
  detect::nvlinksFromNvml(&s);
  GYRE_CHECK(validate(s.topo, "detected topology"));
  *out = std::move(s.topo);
  return ncclSuccess;
}

ncclResult_t hostTopology(Topology* out) {
  std::string file = env::getString("NCCL_TOPO_FILE");
  if (!file.empty()) {
    GYRE_CHECK(loadTopologyFile(file, out));
    GYRE_INFO("INIT", "topology loaded from NCCL_TOPO_FILE=%s (%zu nodes, %zu links)", file.c_str(),
              out->nodes.size(), out->links.size());
  } else {
    GYRE_CHECK(detectTopology(out));
  }
  std::string dump = env::getString("NCCL_TOPO_DUMP_FILE");
  if (!dump.empty()) {
    GYRE_CHECK(dumpTopologyFile(*out, dump));
    GYRE_INFO("INIT", "topology written to NCCL_TOPO_DUMP_FILE=%s", dump.c_str());
  }
  return ncclSuccess;
}

}  // namespace gyre::topo
