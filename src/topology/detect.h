// Building this host's topology. hostTopology() is what communicator init and
// gyre-info call: NCCL_TOPO_FILE, when set, is loaded instead of detecting;
// NCCL_TOPO_DUMP_FILE, when set, receives the result.
//
// Detection combines: hwloc (NUMA nodes, packages, cores, the PCI tree, network
// and InfiniBand devices) or, in a build without hwloc, sysfs alone; NIC port
// speeds from /sys/class/net/*/speed and /sys/class/infiniband/*/ports/*/rate;
// GPUs from the CUDA runtime (when this build has CUDA and a device is
// visible); NVLink from NVML, loaded with dlopen so machines without the
// driver library still work.
#pragma once

#include <map>
#include <string>

#include "include/gyre.h"
#include "src/topology/model.h"

namespace gyre::topo {

ncclResult_t hostTopology(Topology* out);
ncclResult_t detectTopology(Topology* out);

namespace detect {

// Where a PCI device was seen, so a later pass (CUDA) can hang a node there.
struct PciSpot {
  int parent = -1;  // node index
  double bw = 0;    // GB/s of the device's own link
};

struct State {
  Topology topo;
  std::map<std::string, PciSpot> nvidiaDevices;  // bus id -> where hwloc saw it
};

// Each returns false when its source is unavailable (no hwloc in this build),
// leaving the state untouched.
bool fromHwloc(State* s);
void cpusFromSysfs(State* s);
// Adds physical NICs that the earlier passes did not find, and fills in port
// speeds and IB/Ethernet transport for all NICs.
void nicsFromSysfs(State* s);
void gpusFromCuda(State* s);
void nvlinksFromNvml(State* s);

// Helpers shared by the passes.
std::string lowerBusId(const std::string& busId);  // "00000000:18:00.0" -> "0000:18:00.0"
int cpuForNuma(const Topology& t, int numa);       // node index; the first CPU if numa is unknown
double nicSpeedGbps(const std::string& netdev, const std::string& ibdev, int port);  // 0 if unknown
std::string ibTransport(const std::string& ibdev, int port);  // "ib" or "eth" (RoCE)
double sysfsPciBw(const std::string& busId);                  // the device's link, GB/s; 0 if unknown
int sysfsNuma(const std::string& busId);                      // -1 if unknown

}  // namespace detect
}  // namespace gyre::topo
