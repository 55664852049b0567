// The topology model: one host's hardware as a graph. Nodes are the places data
// can start, end or pass through (CPU/NUMA domains, PCI switches, GPUs, NICs,
// NVSwitches); links say how two nodes are wired and how fast. Detection
// (detect.h) and XML loading (xml.h) both produce this; path classification
// (paths.h) and the graph search in src/plan consume it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "include/gyre.h"

namespace gyre::topo {

enum class NodeKind : uint8_t { Cpu, Pci, Gpu, Nic, NvSwitch };
// Pci links form the tree under each CPU; Smp is the socket interconnect
// (UPI/xGMI); NvLink joins GPUs to each other or to NVSwitches.
enum class LinkType : uint8_t { Pci, Smp, NvLink };

const char* kindName(NodeKind k);  // "cpu", "pci", "gpu", "nic", "nvswitch" (also the XML element names)
const char* linkTypeName(LinkType t);  // "pci", "smp", "nvlink"

struct Node {
  NodeKind kind = NodeKind::Cpu;
  std::string id;     // unique within the host: "cpu0", "gpu3", "mlx5_0"
  int index = -1;     // CPU: NUMA node id; GPU: CUDA device ordinal; else -1
  std::string busId;  // PCI address (0000:18:00.0) where there is one
  std::string name;   // model or product text, informational
  // CPU
  int package = -1;
  int cores = 0;
  double memBw = 0;  // GB/s a copy within this NUMA domain moves (ranks sharing the node)
  // GPU
  int sm = 0;  // compute capability x10 (90 = Hopper)
  // NIC
  std::string netdev;     // kernel interface name (eth0, ib0), may be empty for IB-only ports
  std::string transport;  // "ib" or "eth"
  int port = 1;
  double speed = 0;  // GB/s of the network port, each direction
};

struct Link {
  int a = -1, b = -1;  // node indices; a link carries `bw` in each direction
  LinkType type = LinkType::Pci;
  double bw = 0;  // GB/s per direction
  int count = 1;  // NVLink lanes bundled in this link (informational for other types)
};

struct Topology {
  std::string host;
  std::vector<Node> nodes;
  std::vector<Link> links;

  int addNode(Node n);
  int addLink(int a, int b, LinkType type, double bw, int count = 1);
  // Index of the node with this id, or -1.
  int find(const std::string& id) const;
  // Node indices of one kind ordered by (index, id), so GPU k is CUDA device k.
  std::vector<int> ofKind(NodeKind k) const;
  // Link indices touching node `n`, in link order.
  std::vector<int> linksOf(int n) const;
  int otherEnd(int link, int n) const { return links[link].a == n ? links[link].b : links[link].a; }
  // The GPU node with CUDA ordinal `dev`, or -1.
  int gpuByDevice(int dev) const;
};

// Checks the structural rules every consumer relies on: unique non-empty ids,
// link endpoints in range and distinct, positive bandwidths, GPUs and NICs
// attached to something, at least one CPU. `origin` names the source in errors.
ncclResult_t validate(const Topology& t, const char* origin);

// NVLink bandwidth per lane in GB/s for a GPU generation (facts from vendor
// data sheets: NVLink2/3 25 GB/s raw, ~20 usable; NVLink4 ~20.6; NVLink5 ~40).
double nvlinkLaneBw(int sm);

// Effective PCIe bandwidth in GB/s for a generation and lane count (about 3/4 of
// the raw rate after encoding and packet overhead, as measured copy rates show).
double pciBw(int gen, int width);

}  // namespace gyre::topo
