// Detection from sysfs: the fallback for CPUs when hwloc is absent, and the
// source of NIC port speeds and of network devices hwloc did not report.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <set>

#include "src/topology/detect.h"

namespace gyre::topo::detect {
namespace {

// Assumed for a port whose speed the kernel does not report (virtual NICs
// print -1): 10 Gb/s, slow enough that plans never rely on it.
constexpr double kUnknownNicGbps = 10;

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool looksLikeBusId(const std::string& s) {
  // dddd:bb:dd.f
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11})
    if (!isxdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

// The PCI address nearest to a sysfs device (a virtio NIC sits below one).
std::string busIdOf(const std::string& sysPath) {
  char buf[PATH_MAX];
  if (!realpath(sysPath.c_str(), buf)) return "";
  std::string p = buf, last;
  size_t pos = 0;
  while (pos < p.size()) {
    size_t next = p.find('/', pos);
    if (next == std::string::npos) next = p.size();
    std::string part = p.substr(pos, next - pos);
    if (looksLikeBusId(part)) last = part;
    pos = next + 1;
  }
  return last;
}

int countCpus(const std::string& list) {
  int n = 0;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    std::string part = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int a = 0, b = 0;
    if (sscanf(part.c_str(), "%d-%d", &a, &b) == 2) n += b - a + 1;
    else if (sscanf(part.c_str(), "%d", &a) == 1) ++n;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return n;
}

int findNic(const Topology& t, const std::string& name) {
  for (int n : t.ofKind(NodeKind::Nic))
    if (t.nodes[n].id == name || t.nodes[n].netdev == name) return n;
  return -1;
}

void addNic(State* s, Node nic, const std::string& busId) {
  nic.busId = busId;
  int parent = cpuForNuma(s->topo, busId.empty() ? -1 : sysfsNuma(busId));
  double bw = busId.empty() ? 0 : sysfsPciBw(busId);
  int idx = s->topo.addNode(std::move(nic));
  s->topo.addLink(parent, idx, LinkType::Pci, bw > 0 ? bw : pciBw(4, 16));
}

}  // namespace

std::string lowerBusId(const std::string& busId) {
  std::string s;
  for (char c : busId) s += static_cast<char>(tolower(static_cast<unsigned char>(c)));
  size_t first = s.find(':'), last = s.rfind(':');
  if (first == std::string::npos) return s;
  if (first == last) return "0000:" + s;                      // no domain
  if (first > 4) s = s.substr(first - 4);                     // 8-digit domains (NVML, CUDA)
  else if (first < 4) s = std::string(4 - first, '0') + s;
  return s;
}

int cpuForNuma(const Topology& t, int numa) {
  std::vector<int> cpus = t.ofKind(NodeKind::Cpu);
  for (int c : cpus)
    if (t.nodes[c].index == numa) return c;
  return cpus.empty() ? -1 : cpus[0];
}

int sysfsNuma(const std::string& busId) {
  std::string v = readLine("/sys/bus/pci/devices/" + busId + "/numa_node");
  return v.empty() ? -1 : atoi(v.c_str());
}

double sysfsPciBw(const std::string& busId) {
  std::string dir = "/sys/bus/pci/devices/" + busId + "/";
  double gts = atof(readLine(dir + "current_link_speed").c_str());
  int width = atoi(readLine(dir + "current_link_width").c_str());
  if (gts <= 0 || width <= 0) return 0;
  int gen = gts < 4 ? 1 : gts < 6 ? 2 : gts < 12 ? 3 : gts < 24 ? 4 : gts < 48 ? 5 : 6;
  return pciBw(gen, width);
}

double nicSpeedGbps(const std::string& netdev, const std::string& ibdev, int port) {
  if (!ibdev.empty()) {
    // "400 Gb/sec (4X NDR)"
    double rate = atof(readLine("/sys/class/infiniband/" + ibdev + "/ports/" + std::to_string(port) + "/rate").c_str());
    if (rate > 0) return rate;
  }
  if (!netdev.empty()) {
    double mbps = atof(readLine("/sys/class/net/" + netdev + "/speed").c_str());
    if (mbps > 0) return mbps / 1000.0;
  }
  return 0;
}

std::string ibTransport(const std::string& ibdev, int port) {
  std::string layer = readLine("/sys/class/infiniband/" + ibdev + "/ports/" + std::to_string(port) + "/link_layer");
  return layer == "Ethernet" ? "eth" : "ib";
}

void cpusFromSysfs(State* s) {
  for (const std::string& e : listDir("/sys/devices/system/node")) {
    if (e.rfind("node", 0) != 0 || !isdigit(static_cast<unsigned char>(e[4]))) continue;
    Node cpu;
    cpu.kind = NodeKind::Cpu;
    cpu.index = atoi(e.c_str() + 4);
    cpu.id = "cpu" + std::to_string(cpu.index);
    std::string list = readLine("/sys/devices/system/node/" + e + "/cpulist");
    cpu.cores = countCpus(list);
    if (cpu.cores == 0) continue;  // memory-only node (CXL, HBM): no ranks run there
    int first = atoi(list.c_str());
    std::string pkg = readLine("/sys/devices/system/cpu/cpu" + std::to_string(first) + "/topology/physical_package_id");
    cpu.package = pkg.empty() ? -1 : atoi(pkg.c_str());
    s->topo.addNode(std::move(cpu));
  }
}

void nicsFromSysfs(State* s) {
  std::set<std::string> netdevsOfIb;
  for (const std::string& dev : listDir("/sys/class/infiniband")) {
    std::string netdev;
    std::vector<std::string> nets = listDir("/sys/class/infiniband/" + dev + "/device/net");
    if (!nets.empty()) netdev = nets[0];
    for (const std::string& n : nets) netdevsOfIb.insert(n);
    int idx = findNic(s->topo, dev);
    if (idx < 0 && !netdev.empty()) idx = findNic(s->topo, netdev);
    if (idx < 0) {
      Node nic;
      nic.kind = NodeKind::Nic;
      nic.id = dev;
      nic.netdev = netdev;
      addNic(s, std::move(nic), busIdOf("/sys/class/infiniband/" + dev + "/device"));
      idx = static_cast<int>(s->topo.nodes.size()) - 1;
    }
    Node& n = s->topo.nodes[idx];
    n.id = dev;  // the verbs name is what NCCL_IB_HCA selects
    if (n.netdev.empty()) n.netdev = netdev;
    n.transport = ibTransport(dev, n.port);
  }
  for (const std::string& ifname : listDir("/sys/class/net")) {
    // Interfaces without a device link (lo, bridges, veth, ifb) are software.
    if (access(("/sys/class/net/" + ifname + "/device").c_str(), F_OK) != 0) continue;
    if (netdevsOfIb.count(ifname) || findNic(s->topo, ifname) >= 0) continue;
    Node nic;
    nic.kind = NodeKind::Nic;
    nic.id = ifname;
    nic.netdev = ifname;
    nic.transport = "eth";
    addNic(s, std::move(nic), busIdOf("/sys/class/net/" + ifname + "/device"));
  }
  for (int idx : s->topo.ofKind(NodeKind::Nic)) {
    Node& n = s->topo.nodes[idx];
    if (n.transport.empty()) n.transport = "eth";
    if (n.speed > 0) continue;
    bool ib = n.id != n.netdev && !n.id.empty() && access(("/sys/class/infiniband/" + n.id).c_str(), F_OK) == 0;
    double gbps = nicSpeedGbps(n.netdev, ib ? n.id : "", n.port);
    if (gbps <= 0) {
      gbps = kUnknownNicGbps;
      n.name += n.name.empty() ? "speed unknown, assumed 10 Gb/s" : " (speed unknown, assumed 10 Gb/s)";
    }
    n.speed = gbps / 8.0;
  }
}

}  // namespace gyre::topo::detect
