// CPU affinity: which NUMA node a process runs on (so a host-memory rank is
// placed on its socket in the topology) and binding helper threads near the
// device or NIC they serve. NCCL_IGNORE_CPU_AFFINITY=1 makes binding ignore
// the affinity mask the launcher gave the process (as in NCCL): the thread
// then takes every CPU of the node, instead of the mask's CPUs on that node.
#pragma once

namespace gyre::topo {

// The NUMA node holding every CPU this process may run on; -1 when the mask
// spans several nodes or the machine reports no NUMA information.
int processNumaNode();

// Binds the calling thread to the CPUs of `numaNode` (-1: leaves it alone).
// Returns false, changing nothing, when that leaves no CPU to run on.
bool bindThreadToNuma(int numaNode);

}  // namespace gyre::topo
