// gyre-info section: this host's CPU facts and the host planner's thresholds
// they led to (src/plan/host_thresholds.h), each with its reason.
#include <cstdio>

#include "src/config/env.h"
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
  // Not a threshold but chosen the same way: a host communicator's FIFOs.
  std::string why;
  size_t fifo = hostFifoBytesForCpu(cpu, 3, &why);  // the rule's case; a pair keeps NCCL's default
  why += "; 2 ranks keep 4 MiB; ranks on different CPUs take the smallest";
  const env::Setting set = env::lookup("NCCL_BUFFSIZE");
  int64_t setBytes = 0;
  if (env::isSet(set) && env::parseBytes(set.value, &setBytes)) {
    fifo = static_cast<size_t>(setBytes);
    why = "NCCL_BUFFSIZE=" + set.value + " (" + env::originOf(set) + ")";
  }
  printf("  %-50s %-9s %s [NCCL_BUFFSIZE]\n",
         "host communicators: FIFO bytes a connection", thresholdText(fifo).c_str(), why.c_str());
  return 0;
}

}  // namespace gyre::info
