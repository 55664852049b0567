// gyre-info section: this host's CPU facts and the host planner's thresholds
// they led to (src/plan/host_thresholds.h), each with its reason.
#include <cstdio>

#include "src/plan/host_thresholds.h"
#include "tools/info.h"

namespace gyre::info {

int printHostThresholds() {
  const topo::CpuFacts& cpu = topo::hostCpuFacts();
  printf("\n== Host planner thresholds for this CPU\n");
  printf("CPU: %s (%s, family %d, model %d); L2 %s a core, L3 %s; %d cores online, %d NUMA node(s)\n",
         cpu.modelName.empty() ? "?" : cpu.modelName.c_str(), topo::cpuVendorName(cpu.vendor), cpu.family, cpu.model,
         cpu.l2Bytes ? thresholdText(cpu.l2Bytes).c_str() : "?", cpu.l3Bytes ? thresholdText(cpu.l3Bytes).c_str() : "none",
         cpu.cores, cpu.numaNodes);
  HostThresholds t;
  if (hostThresholds(&t) != ncclSuccess) {
    fprintf(stderr, "gyre-info: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  for (int i = 0; i < HostThresholds::kCount; ++i) {
    const HostThresholdSpec& s = hostThresholdSpecs()[i];
    printf("  %-50s %-9s %s [%s]\n", s.name, thresholdText(t.*s.field).c_str(), t.why[i].c_str(), s.env);
  }
  return 0;
}

}  // namespace gyre::info
