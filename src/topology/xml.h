// Topology XML: NCCL_TOPO_DUMP_FILE writes it, NCCL_TOPO_FILE reads it.
//
// Schema (version 1). Units: bandwidths in GB/s per direction, NIC port speed
// in Gb/s as ethtool reports it. Nesting is the PCI tree: an element's `bw`
// is its link to the element that contains it (default: from `gen` and `width`
// when given, else PCIe Gen4 x16: 23.6). Links that are not PCI-tree edges are
// <link> elements at top level. A pci, gpu or nic element at top level has no
// tree link and is joined to the rest by <link> elements only.
//
//   <?xml version="1.0"?>
//   <topology version="1" host="NAME">
//     <cpu id="cpu0" numa="0" package="0" cores="56" membw="100" name="TEXT">
//       <pci id="sw0" busid="0000:15:00.0" bw="48" name="TEXT">
//         <gpu id="gpu0" dev="0" busid="0000:18:00.0" sm="90" name="H100" bw="48"/>
//         <nic id="mlx5_0" netdev="ib0" transport="ib" port="1" gbps="400" bw="48"/>
//       </pci>
//     </cpu>
//     <nvswitch id="nvs0"/>
//     <link a="gpu0" b="nvs0" type="nvlink" count="5"/>
//     <link a="cpu0" b="cpu1" type="smp" bw="40"/>
//   </topology>
//
//   cpu      id, numa (NUMA node; default: order of appearance), package,
//            cores, membw (copy bandwidth inside the node, default 20), name
//   pci      id, busid, bw | gen + width, name           (a switch or bridge)
//   gpu      id, dev (CUDA ordinal, required), busid, sm (70, 80, 90, ...),
//            name, bw | gen + width
//   nic      id, gbps (required), netdev, transport (ib | eth), port, busid,
//            name, bw | gen + width
//   nvswitch id, name
//   link     a, b (node ids), type (pci | smp | nvlink), count (NVLink lanes),
//            bw (required except for nvlink: count x lane bandwidth of the
//            GPU generation)
//
// Unknown elements or attributes, duplicate ids and dangling link ends are
// errors that name the file and line, so a typo never silently changes a plan.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "include/gyre.h"
#include "src/topology/model.h"

namespace gyre::topo {

// A parsed XML element: the small subset of XML the schema needs (elements,
// attributes, comments, the <?xml?> prologue, the five named entities and
// numeric character references). Text content other than whitespace is an error.
struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<XmlElement> children;
  int line = 0;

  const std::string* attr(const std::string& key) const;
  void set(const std::string& key, const std::string& value) { attrs.emplace_back(key, value); }
};

// Parses one document. `origin` (a file name) starts every error message,
// followed by the line: "topo.xml:12: expected '>' after attribute list".
ncclResult_t parseXml(const std::string& text, const std::string& origin, XmlElement* root);
// Serialises with two-space indentation, escaping attribute values.
std::string writeXml(const XmlElement& root);

// Schema <-> model.
ncclResult_t topologyFromXml(const XmlElement& root, const std::string& origin, Topology* out);
XmlElement topologyToXml(const Topology& t);

// File helpers: read-parse-convert-validate, and convert-write.
ncclResult_t loadTopologyFile(const std::string& path, Topology* out);
ncclResult_t parseTopologyText(const std::string& text, const std::string& origin, Topology* out);
ncclResult_t dumpTopologyFile(const Topology& t, const std::string& path);

}  // namespace gyre::topo
