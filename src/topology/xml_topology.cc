// Reading the topology schema (documented in xml.h) into the model.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "src/debug/error.h"
#include "src/topology/xml.h"

namespace gyre::topo {
namespace {

const double kDefaultTreeBw = pciBw(4, 16);  // PCIe Gen4 x16, the common case when a file omits bw
constexpr double kDefaultMemBw = 20.0;   // a conservative single-socket memcpy rate

// Reads attributes of one element, rejecting any the schema does not know.
class Attrs {
 public:
  Attrs(const XmlElement& e, const std::string& origin) : e_(e), origin_(origin) {}

  ncclResult_t check(std::initializer_list<const char*> known) const {
    for (const auto& [k, v] : e_.attrs) {
      bool ok = false;
      for (const char* n : known) ok = ok || k == n;
      if (!ok) {
        std::string list;
        for (const char* n : known) list += (list.empty() ? "" : ", ") + std::string(n);
        return fail(ncclInvalidUsage, "%s:%d: <%s> has no attribute \"%s\" (known: %s)", origin_.c_str(), e_.line,
                    e_.name.c_str(), k.c_str(), list.c_str());
      }
    }
    return ncclSuccess;
  }
  std::string str(const char* key, const std::string& dflt = "") const {
    const std::string* v = e_.attr(key);
    return v ? *v : dflt;
  }
  bool has(const char* key) const { return e_.attr(key) != nullptr; }
  ncclResult_t required(const char* key, std::string* out) const {
    const std::string* v = e_.attr(key);
    if (!v || v->empty())
      return fail(ncclInvalidUsage, "%s:%d: <%s> needs a %s attribute", origin_.c_str(), e_.line, e_.name.c_str(), key);
    *out = *v;
    return ncclSuccess;
  }
  ncclResult_t number(const char* key, double dflt, double* out, bool positive = false) const {
    const std::string* v = e_.attr(key);
    if (!v) {
      *out = dflt;
      return ncclSuccess;
    }
    char* end = nullptr;
    errno = 0;
    double d = strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || errno != 0 || !std::isfinite(d) || d < 0 || (positive && d == 0))
      return fail(ncclInvalidUsage, "%s:%d: <%s %s=\"%s\"> is not a %s number", origin_.c_str(), e_.line,
                  e_.name.c_str(), key, v->c_str(), positive ? "positive" : "non-negative");
    *out = d;
    return ncclSuccess;
  }
  ncclResult_t integer(const char* key, int dflt, int* out) const {
    double d = 0;
    GYRE_CHECK(number(key, dflt, &d));
    if (d != std::floor(d) || d > 1e9)
      return fail(ncclInvalidUsage, "%s:%d: <%s %s=...> must be a whole number", origin_.c_str(), e_.line,
                  e_.name.c_str(), key);
    *out = static_cast<int>(d);
    return ncclSuccess;
  }
  // The link to the parent element: bw, else gen/width, else the default.
  ncclResult_t treeBw(double* out) const {
    if (has("bw")) return number("bw", 0, out, true);
    if (has("gen") || has("width")) {
      int gen = 0, width = 0;
      GYRE_CHECK(integer("gen", 4, &gen));
      GYRE_CHECK(integer("width", 16, &width));
      *out = pciBw(gen, width);
      return ncclSuccess;
    }
    *out = kDefaultTreeBw;
    return ncclSuccess;
  }

 private:
  const XmlElement& e_;
  const std::string& origin_;
};

struct Loader {
  const std::string& origin;
  Topology* t;
  std::map<std::string, int> lines;  // id -> line, for duplicate reports
  int nextNuma = 0;

  ncclResult_t addNode(const XmlElement& e, Node n, int* index) {
    auto [it, fresh] = lines.emplace(n.id, e.line);
    if (!fresh)
      return fail(ncclInvalidUsage, "%s:%d: id \"%s\" was already used on line %d", origin.c_str(), e.line,
                  n.id.c_str(), it->second);
    *index = t->addNode(std::move(n));
    return ncclSuccess;
  }

  ncclResult_t node(const XmlElement& e, int parent) {
    Attrs a(e, origin);
    Node n;
    std::string id;
    GYRE_CHECK(a.required("id", &id));
    n.id = id;
    n.name = a.str("name");
    n.busId = a.str("busid");
    double up = 0;
    if (e.name == "cpu") {
      if (parent >= 0)
        return fail(ncclInvalidUsage, "%s:%d: <cpu> belongs at the top level, not inside <%s>", origin.c_str(), e.line,
                    kindName(t->nodes[parent].kind));
      GYRE_CHECK(a.check({"id", "numa", "package", "cores", "membw", "name"}));
      n.kind = NodeKind::Cpu;
      GYRE_CHECK(a.integer("numa", nextNuma, &n.index));
      nextNuma = n.index + 1;
      GYRE_CHECK(a.integer("package", -1, &n.package));
      GYRE_CHECK(a.integer("cores", 0, &n.cores));
      GYRE_CHECK(a.number("membw", kDefaultMemBw, &n.memBw, true));
    } else if (e.name == "pci" || e.name == "gpu" || e.name == "nic") {
      GYRE_CHECK(a.treeBw(&up));
      if (e.name == "pci") {
        GYRE_CHECK(a.check({"id", "busid", "bw", "gen", "width", "name"}));
        n.kind = NodeKind::Pci;
      } else if (e.name == "gpu") {
        GYRE_CHECK(a.check({"id", "dev", "busid", "sm", "name", "bw", "gen", "width"}));
        n.kind = NodeKind::Gpu;
        std::string dev;
        GYRE_CHECK(a.required("dev", &dev));
        GYRE_CHECK(a.integer("dev", -1, &n.index));
        GYRE_CHECK(a.integer("sm", 0, &n.sm));
      } else {
        GYRE_CHECK(a.check({"id", "gbps", "netdev", "transport", "port", "busid", "name", "bw", "gen", "width"}));
        n.kind = NodeKind::Nic;
        std::string gbps;
        GYRE_CHECK(a.required("gbps", &gbps));
        double g = 0;
        GYRE_CHECK(a.number("gbps", 0, &g, true));
        n.speed = g / 8.0;
        n.netdev = a.str("netdev");
        n.transport = a.str("transport", "eth");
        if (n.transport != "ib" && n.transport != "eth")
          return fail(ncclInvalidUsage, "%s:%d: <nic transport=\"%s\"> must be ib or eth", origin.c_str(), e.line,
                      n.transport.c_str());
        GYRE_CHECK(a.integer("port", 1, &n.port));
      }
      if (n.kind != NodeKind::Pci && !e.children.empty())
        return fail(ncclInvalidUsage, "%s:%d: <%s> cannot contain other elements", origin.c_str(), e.line,
                    e.name.c_str());
    } else if (e.name == "nvswitch") {
      if (parent >= 0)
        return fail(ncclInvalidUsage, "%s:%d: <nvswitch> belongs at the top level", origin.c_str(), e.line);
      GYRE_CHECK(a.check({"id", "name"}));
      n.kind = NodeKind::NvSwitch;
    } else {
      return fail(ncclInvalidUsage,
                  "%s:%d: unknown element <%s> (known: cpu, pci, gpu, nic, nvswitch, link)", origin.c_str(), e.line,
                  e.name.c_str());
    }
    int self = -1;
    GYRE_CHECK(addNode(e, std::move(n), &self));
    if (parent >= 0) t->addLink(parent, self, LinkType::Pci, up);
    for (const XmlElement& c : e.children) GYRE_CHECK(node(c, self));
    return ncclSuccess;
  }

  ncclResult_t link(const XmlElement& e) {
    Attrs a(e, origin);
    GYRE_CHECK(a.check({"a", "b", "type", "bw", "count"}));
    std::string ida, idb, type;
    GYRE_CHECK(a.required("a", &ida));
    GYRE_CHECK(a.required("b", &idb));
    GYRE_CHECK(a.required("type", &type));
    int na = t->find(ida), nb = t->find(idb);
    if (na < 0 || nb < 0)
      return fail(ncclInvalidUsage, "%s:%d: <link> names \"%s\", which no element declares", origin.c_str(), e.line,
                  (na < 0 ? ida : idb).c_str());
    if (na == nb) return fail(ncclInvalidUsage, "%s:%d: <link> joins \"%s\" to itself", origin.c_str(), e.line, ida.c_str());
    LinkType lt;
    if (type == "pci") lt = LinkType::Pci;
    else if (type == "smp") lt = LinkType::Smp;
    else if (type == "nvlink") lt = LinkType::NvLink;
    else
      return fail(ncclInvalidUsage, "%s:%d: <link type=\"%s\"> must be pci, smp or nvlink", origin.c_str(), e.line,
                  type.c_str());
    int count = 1;
    GYRE_CHECK(a.integer("count", 1, &count));
    if (count < 1) return fail(ncclInvalidUsage, "%s:%d: <link count=...> must be at least 1", origin.c_str(), e.line);
    double bw = 0;
    if (a.has("bw")) {
      GYRE_CHECK(a.number("bw", 0, &bw, true));
    } else if (lt == LinkType::NvLink) {
      int sm = 0;
      for (int n : {na, nb})
        if (t->nodes[n].kind == NodeKind::Gpu) sm = std::max(sm, t->nodes[n].sm);
      bw = count * nvlinkLaneBw(sm);
    } else {
      return fail(ncclInvalidUsage, "%s:%d: a %s <link> needs bw (GB/s)", origin.c_str(), e.line, type.c_str());
    }
    t->addLink(na, nb, lt, bw, count);
    return ncclSuccess;
  }
};

}  // namespace

ncclResult_t topologyFromXml(const XmlElement& root, const std::string& origin, Topology* out) {
  *out = Topology();
  if (root.name != "topology")
    return fail(ncclInvalidUsage, "%s:%d: the root element is <%s>; expected <topology>", origin.c_str(), root.line,
                root.name.c_str());
  Attrs a(root, origin);
  GYRE_CHECK(a.check({"version", "host"}));
  if (a.str("version", "1") != "1")
    return fail(ncclInvalidUsage, "%s:%d: topology version \"%s\" is not supported (this gyre reads version 1)",
                origin.c_str(), root.line, a.str("version").c_str());
  out->host = a.str("host");
  Loader loader{origin, out, {}, 0};
  for (const XmlElement& e : root.children)
    if (e.name != "link") GYRE_CHECK(loader.node(e, -1));
  for (const XmlElement& e : root.children)
    if (e.name == "link") GYRE_CHECK(loader.link(e));
  return validate(*out, origin.c_str());
}

ncclResult_t parseTopologyText(const std::string& text, const std::string& origin, Topology* out) {
  XmlElement root;
  GYRE_CHECK(parseXml(text, origin, &root));
  return topologyFromXml(root, origin, out);
}

ncclResult_t loadTopologyFile(const std::string& path, Topology* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ncclSystemError, "cannot open topology file %s: %s", path.c_str(), strerror(errno));
  std::stringstream buf;
  buf << in.rdbuf();
  return parseTopologyText(buf.str(), path, out);
}

}  // namespace gyre::topo
