// Detection through hwloc: NUMA nodes become CPU nodes; the PCI tree below
// them keeps only switches that lead to GPUs or NICs.
#include "src/topology/detect.h"

#ifdef GYRE_HAVE_HWLOC
#include <hwloc.h>

#include <cstdio>

namespace gyre::topo::detect {
namespace {

// hwloc reports raw link rates; the model uses what copies achieve (pciBw()).
constexpr double kPciEfficiency = 0.75;

// A PCIe switch shows up in hwloc as an upstream bridge with one downstream
// bridge per port. Those are one device: devices behind the same switch are
// one hop apart (NCCL's PIX). Root ports belong to the CPU.
using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;

enum class Role { HostBridge, RootPort, Upstream, Downstream };

std::string busIdOf(hwloc_obj_t o) {
  const PciAttr& a = o->type == HWLOC_OBJ_BRIDGE ? o->attr->bridge.upstream.pci : o->attr->pcidev;
  char buf[32];
  snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", static_cast<unsigned>(a.domain), a.bus, a.dev, a.func);
  return buf;
}

// Model strings from firmware are often padded with spaces.
std::string trimmed(const char* s) {
  std::string v = s;
  size_t a = v.find_first_not_of(' '), b = v.find_last_not_of(' ');
  return a == std::string::npos ? "" : v.substr(a, b - a + 1);
}

double linkBw(float linkspeed) { return linkspeed > 0 ? linkspeed * kPciEfficiency : pciBw(4, 16); }

class Walker {
 public:
  Walker(hwloc_topology_t h, State* s) : h_(h), s_(s) {}

  void objects(hwloc_obj_t o) {
    if (o->io_arity > 0) {
      int numa = o->nodeset && !hwloc_bitmap_iszero(o->nodeset) &&
                         hwloc_bitmap_weight(o->nodeset) < static_cast<int>(s_->topo.ofKind(NodeKind::Cpu).size())
                     ? hwloc_bitmap_first(o->nodeset)
                     : -1;
      int cpu = cpuForNuma(s_->topo, numa);
      for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) io(c, cpu, Role::HostBridge);
    }
    for (unsigned i = 0; i < o->arity; ++i) objects(o->children[i]);
  }

 private:
  hwloc_topology_t h_;
  State* s_;

  void io(hwloc_obj_t o, int parent, Role callerRole) {
    if (o->type == HWLOC_OBJ_BRIDGE) {
      Role role = Role::RootPort;
      if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) role = Role::HostBridge;
      else if (callerRole == Role::HostBridge) role = Role::RootPort;
      else if (callerRole == Role::Upstream) role = Role::Downstream;
      else role = Role::Upstream;
      int next = parent;
      if (role == Role::Upstream) {
        Node sw;
        sw.kind = NodeKind::Pci;
        sw.busId = busIdOf(o);
        sw.id = "pci" + sw.busId;
        next = s_->topo.addNode(std::move(sw));
        s_->topo.addLink(parent, next, LinkType::Pci, linkBw(o->attr->bridge.upstream.pci.linkspeed));
      }
      for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) io(c, next, role);
      return;
    }
    if (o->type != HWLOC_OBJ_PCI_DEVICE) return;
    const PciAttr& a = o->attr->pcidev;
    unsigned cls = a.class_id >> 8;
    std::string busId = busIdOf(o);
    double bw = linkBw(a.linkspeed);
    if (a.vendor_id == 0x10de && cls == 0x03) {
      s_->nvidiaDevices[busId] = PciSpot{parent, bw};
      return;
    }
    bool network = cls == 0x02 || a.class_id == 0x0c06;  // Ethernet/other network, or InfiniBand (serial bus 06)
    if (!network) return;
    std::string netdev, ibdev;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && netdev.empty()) netdev = c->name;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && ibdev.empty()) ibdev = c->name;
    }
    if (netdev.empty() && ibdev.empty()) return;  // no driver bound: nothing can use it
    Node nic;
    nic.kind = NodeKind::Nic;
    nic.id = ibdev.empty() ? netdev : ibdev;
    nic.netdev = netdev;
    nic.busId = busId;
    nic.transport = ibdev.empty() ? "eth" : "ib";
    if (const char* model = hwloc_obj_get_info_by_name(o, "PCIDevice")) nic.name = trimmed(model);
    int idx = s_->topo.addNode(std::move(nic));
    s_->topo.addLink(parent, idx, LinkType::Pci, bw);
  }
};

hwloc_obj_t packageOf(hwloc_topology_t h, hwloc_obj_t numa) {
  if (hwloc_obj_t p = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_PACKAGE, numa)) return p;
  int n = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PACKAGE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t p = hwloc_get_obj_by_type(h, HWLOC_OBJ_PACKAGE, i);
    if (hwloc_bitmap_intersects(p->cpuset, numa->cpuset)) return p;
  }
  return nullptr;
}

}  // namespace

bool fromHwloc(State* s) {
  hwloc_topology_t h;
  if (hwloc_topology_init(&h) != 0) return false;
  hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // GPUs come from the CUDA runtime and NVML (detect_gpu.cc); hwloc's own GPU
  // plugins would only load vendor libraries (OpenCL, GL...) for nothing.
  for (const char* plugin : {"cuda", "nvml", "opencl", "rsmi", "levelzero", "gl"})
    hwloc_topology_set_components(h, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, plugin);
  if (hwloc_topology_load(h) != 0) {
    hwloc_topology_destroy(h);
    return false;
  }
  int nnuma = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t numa = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, i);
    if (!numa->cpuset || hwloc_bitmap_iszero(numa->cpuset)) continue;  // memory-only node
    Node cpu;
    cpu.kind = NodeKind::Cpu;
    cpu.index = static_cast<int>(numa->os_index);
    cpu.id = "cpu" + std::to_string(cpu.index);
    cpu.cores = hwloc_get_nbobjs_inside_cpuset_by_type(h, numa->cpuset, HWLOC_OBJ_CORE);
    if (hwloc_obj_t pkg = packageOf(h, numa)) {
      cpu.package = static_cast<int>(pkg->os_index);
      if (const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModel")) cpu.name = trimmed(model);
    }
    s->topo.addNode(std::move(cpu));
  }
  if (s->topo.ofKind(NodeKind::Cpu).empty()) {
    hwloc_topology_destroy(h);
    return false;
  }
  Walker(h, s).objects(hwloc_get_root_obj(h));
  hwloc_topology_destroy(h);
  return true;
}

}  // namespace gyre::topo::detect

#else

namespace gyre::topo::detect {
bool fromHwloc(State*) { return false; }
}  // namespace gyre::topo::detect

#endif
