// The topology XML reader (NCCL_TOPO_FILE and the shipped files): the text
// parsed into elements, the elements read into a Topology, and a topology
// that was accepted written back and read again to the same text.
#include <string>

#include "src/topology/xml.h"

using namespace gyre::topo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  XmlElement root;
  if (parseXml(text, "fuzz.xml", &root) != ncclSuccess) return 0;
  (void)writeXml(root);
  Topology t;
  if (topologyFromXml(root, "fuzz.xml", &t) != ncclSuccess) return 0;
  const std::string once = writeXml(topologyToXml(t));
  Topology again;
  if (parseTopologyText(once, "fuzz-rewritten.xml", &again) != ncclSuccess) __builtin_trap();
  if (writeXml(topologyToXml(again)) != once) __builtin_trap();
  return 0;
}
