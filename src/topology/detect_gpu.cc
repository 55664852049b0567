// GPUs from the CUDA runtime and their NVLinks from NVML. NVML is opened with
// dlopen: it ships with the driver, and a machine without one (or a build
// without CUDA) simply has no GPUs to describe.
#include <dlfcn.h>

#include <map>

#include "src/debug/log.h"
#include "src/topology/detect.h"

#ifdef GYRE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace gyre::topo::detect {

void gpusFromCuda(State* s) {
#ifdef GYRE_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" so later CUDA calls are not blamed
    return;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    char bus[64] = {0};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof(bus), d) != cudaSuccess) {
      GYRE_WARN("topology: CUDA device %d could not be queried; it is left out", d);
      cudaGetLastError();
      continue;
    }
    Node gpu;
    gpu.kind = NodeKind::Gpu;
    gpu.index = d;
    gpu.id = "gpu" + std::to_string(d);
    gpu.busId = lowerBusId(bus);
    gpu.name = prop.name;
    gpu.sm = prop.major * 10 + prop.minor;
    auto seen = s->nvidiaDevices.find(gpu.busId);
    int parent = seen != s->nvidiaDevices.end() ? seen->second.parent : cpuForNuma(s->topo, sysfsNuma(gpu.busId));
    double bw = seen != s->nvidiaDevices.end() ? seen->second.bw : sysfsPciBw(gpu.busId);
    int idx = s->topo.addNode(std::move(gpu));
    s->topo.addLink(parent, idx, LinkType::Pci, bw > 0 ? bw : pciBw(4, 16));
  }
#else
  (void)s;
#endif
}

namespace {

// NVML's ABI, as its public header defines it.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
constexpr int kNvmlSuccess = 0;
constexpr unsigned kMaxNvLinks = 18;       // NVML_NVLINK_MAX_LINKS for Hopper; older GPUs report fewer active
constexpr int kNvmlRemoteIbmNpu = 1;       // NVML_NVLINK_DEVICE_TYPE_IBMNPU: a CPU, not a GPU or switch

struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*byBusId)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*remotePci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*remoteType)(nvmlDevice_t, unsigned, int*) = nullptr;  // absent before driver R460

  bool open() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    init = reinterpret_cast<decltype(init)>(dlsym(lib, "nvmlInit_v2"));
    shutdown = reinterpret_cast<decltype(shutdown)>(dlsym(lib, "nvmlShutdown"));
    byBusId = reinterpret_cast<decltype(byBusId)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    linkState = reinterpret_cast<decltype(linkState)>(dlsym(lib, "nvmlDeviceGetNvLinkState"));
    remotePci = reinterpret_cast<decltype(remotePci)>(dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
    remoteType = reinterpret_cast<decltype(remoteType)>(dlsym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType"));
    return init && shutdown && byBusId && linkState && remotePci && init() == kNvmlSuccess;
  }
  ~Nvml() {
    if (lib && shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};

}  // namespace

void nvlinksFromNvml(State* s) {
  std::vector<int> gpus = s->topo.ofKind(NodeKind::Gpu);
  if (gpus.empty()) return;
  Nvml nvml;
  if (!nvml.open()) {
    GYRE_INFO("INIT", "topology: NVML not available; NVLink connections are not detected");
    return;
  }
  std::map<std::string, int> gpuByBus, switchByBus;
  for (int g : gpus) gpuByBus[s->topo.nodes[g].busId] = g;
  std::map<std::pair<int, int>, int> lanes;  // (node, node) -> active NVLink lanes
  for (int g : gpus) {
    nvmlDevice_t dev = nullptr;
    if (nvml.byBusId(s->topo.nodes[g].busId.c_str(), &dev) != kNvmlSuccess) continue;
    for (unsigned l = 0; l < kMaxNvLinks; ++l) {
      int active = 0;
      NvmlPciInfo remote{};
      if (nvml.linkState(dev, l, &active) != kNvmlSuccess || !active) continue;
      if (nvml.remotePci(dev, l, &remote) != kNvmlSuccess) continue;
      int type = -1;
      if (nvml.remoteType && nvml.remoteType(dev, l, &type) == kNvmlSuccess && type == kNvmlRemoteIbmNpu) continue;
      std::string bus = lowerBusId(remote.busId);
      int peer = -1;
      if (auto it = gpuByBus.find(bus); it != gpuByBus.end()) {
        if (it->second < g) continue;  // counted from the lower GPU's side
        peer = it->second;
      } else if (auto sw = switchByBus.find(bus); sw != switchByBus.end()) {
        peer = sw->second;
      } else {
        Node nvs;
        nvs.kind = NodeKind::NvSwitch;
        nvs.id = "nvs" + std::to_string(switchByBus.size());
        nvs.busId = bus;
        peer = s->topo.addNode(std::move(nvs));
        switchByBus[bus] = peer;
      }
      ++lanes[{g, peer}];
    }
  }
  for (const auto& [ends, n] : lanes)
    s->topo.addLink(ends.first, ends.second, LinkType::NvLink, n * nvlinkLaneBw(s->topo.nodes[ends.first].sm), n);
}

}  // namespace gyre::topo::detect
