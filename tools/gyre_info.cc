// gyre-info: shows what gyre sees and what it would do on this machine (or on
// a topology file): the topology, the path between every pair of devices, the
// rings and trees per channel, the effective configuration and where each
// value came from, and the planner's pick per collective over a size sweep.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "tools/info.h"
#include "src/topology/detect.h"
#include "src/topology/xml.h"

extern char** environ;

using namespace gyre;

namespace {

const char* kUsage =
    "usage: gyre-info [options]\n"
    "       gyre-info status [--counters] [--dir FOLDER] [--wait-ms N]\n"
    "                       what this user's running jobs on this host are doing\n"
    "  --topo FILE     use this topology XML instead of detecting (as NCCL_TOPO_FILE)\n"
    "  --dump FILE     write the topology as XML (as NCCL_TOPO_DUMP_FILE)\n"
    "  --nodes K       model K hosts, each a copy of the topology (default 1)\n"
    "  --ranks N       N host-memory ranks per host (default: one per GPU, or on a\n"
    "                  host without GPUs 2 per NUMA node and at least 4)\n"
    "  --tuning SIZE   print the full AllReduce cost table at SIZE (e.g. 64K, 1M)\n"
    "  --tuner LIB     also show the picks with this tuner plugin (a path, or NAME\n"
    "                  for libnccl-tuner-NAME.so, as NCCL_TUNER_PLUGIN)\n"
    "  --dot FILE      write Graphviz of the topology with the rings and trees\n"
    "  --png FILE      render that picture with Graphviz dot, when installed\n"
    "  --channels N    draw at most N ring channels (default 4)\n"
    "  --help          this text\n";

struct Options {
  std::string topo, dump, dot, png, tuner;
  int nodes = 1, ranks = 0, drawChannels = 4;
  size_t tuning = 0;
};

bool positive(const char* text, int* out) {
  char* end = nullptr;
  long v = strtol(text, &end, 10);
  if (*end != '\0' || v < 1 || v > 4096) return false;
  *out = static_cast<int>(v);
  return true;
}

int usageError(const char* fmt, const char* arg) {
  fprintf(stderr, "gyre-info: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n%s", kUsage);
  return 2;
}

int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      fputs(kUsage, stdout);
      exit(0);
    }
    if (i + 1 >= argc) return usageError("%s needs a value (or is unknown)", argv[i]);
    const char* v = argv[++i];
    if (a == "--topo") o->topo = v;
    else if (a == "--dump") o->dump = v;
    else if (a == "--dot") o->dot = v;
    else if (a == "--png") o->png = v;
    else if (a == "--tuner") o->tuner = v;
    else if (a == "--nodes") {
      if (!positive(v, &o->nodes)) return usageError("--nodes \"%s\": expected a count from 1 to 4096", v);
    } else if (a == "--ranks") {
      if (!positive(v, &o->ranks)) return usageError("--ranks \"%s\": expected a count from 1 to 4096", v);
    } else if (a == "--channels") {
      if (!positive(v, &o->drawChannels)) return usageError("--channels \"%s\": expected a positive count", v);
    } else if (a == "--tuning") {
      int64_t b = 0;
      if (!env::parseBytes(v, &b) || b <= 0) return usageError("--tuning \"%s\": expected a size like 64K or 1M", v);
      o->tuning = static_cast<size_t>(b);
    } else {
      return usageError("unknown option %s", a.c_str());
    }
  }
  return 0;
}

bool haveDot() {
  const char* path = getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= p.size()) {
    size_t colon = p.find(':', pos);
    std::string dir = p.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    if (!dir.empty() && access((dir + "/dot").c_str(), X_OK) == 0) return true;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return false;
}

// Runs dot directly (no shell), so file names need no quoting.
bool renderPng(const std::string& dot, const std::string& png) {
  std::string a0 = "dot", a1 = "-Tpng", a3 = "-o";
  char* argv[] = {a0.data(), a1.data(), const_cast<char*>(dot.c_str()), a3.data(), const_cast<char*>(png.c_str()),
                  nullptr};
  pid_t pid = 0;
  if (posix_spawnp(&pid, "dot", nullptr, nullptr, argv, environ) != 0) return false;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int fail(const char* what) {
  fprintf(stderr, "gyre-info: %s: %s\n", what, lastErrorText());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "status") return info::runStatus(argc - 1, argv + 1);
  Options o;
  if (int rc = parse(argc, argv, &o)) return rc;
  if (env::validateAll() != ncclSuccess) return fail("configuration");

  topo::Topology t;
  info::Model m;
  if (!o.topo.empty()) {
    if (topo::loadTopologyFile(o.topo, &t) != ncclSuccess) return fail("topology");
    m.source = o.topo;
  } else {
    if (topo::hostTopology(&t) != ncclSuccess) return fail("topology");
    std::string file = env::getString("NCCL_TOPO_FILE");
    m.source = file.empty() ? "detected on this host" : "NCCL_TOPO_FILE=" + file;
  }
  if (!o.dump.empty()) {
    if (topo::dumpTopologyFile(t, o.dump) != ncclSuccess) return fail("dump");
    printf("topology written to %s\n", o.dump.c_str());
  }

  // A host without GPUs gets a few host-memory ranks per NUMA node unless told,
  // so there is a ring to look at even on a one-socket machine.
  int ranks = o.ranks;
  if (ranks == 0 && t.ofKind(topo::NodeKind::Gpu).empty())
    ranks = std::max<int>(4, 2 * static_cast<int>(t.ofKind(topo::NodeKind::Cpu).size()));
  m.placement = topo::replicate(t, o.nodes, ranks);
  RingOptions ro;
  int64_t minCh = 1, maxCh = 16;
  if (env::getInt("NCCL_MIN_NCHANNELS", &minCh) != ncclSuccess || env::getInt("NCCL_MAX_NCHANNELS", &maxCh) != ncclSuccess)
    return fail("configuration");
  ro.minChannels = static_cast<int>(minCh);
  ro.maxChannels = static_cast<int>(std::max(minCh, maxCh));
  // As communicator init plans host-memory ranks (src/comm/comm_topology.cc).
  m.hostMemory = std::all_of(m.placement.ranks.begin(), m.placement.ranks.end(),
                             [](const topo::RankSite& s) { return s.gpu < 0; });
  if (m.hostMemory) ro.minChannels = std::max(ro.minChannels, std::min(ro.maxChannels, kHostMinChannels));
  if (buildRings(m.placement, ro, &m.rings) != ncclSuccess) return fail("ring search");
  if (commTrees(m.placement, m.rings, &m.trees) != ncclSuccess) return fail("tree search");

  info::printTopology(m);
  info::printPaths(m);
  info::printPlacement(m);
  info::printRings(m);
  info::printTrees(m);
  info::printConfig();
  if (info::printPlanner(m, o.tuning) != 0) return fail("planner settings");
  if (info::printHostThresholds() != 0) return 1;
  if (!o.tuner.empty() && info::printTunedPlanner(m, o.tuner) != 0) return 1;

  std::string dot = o.dot;
  if (dot.empty() && !o.png.empty()) dot = o.png + ".dot";
  if (!dot.empty()) {
    if (!info::writeDot(m, dot, o.drawChannels)) {
      fprintf(stderr, "gyre-info: cannot write %s: %s\n", dot.c_str(), strerror(errno));
      return 1;
    }
    printf("\nGraphviz written to %s\n", dot.c_str());
  }
  if (!o.png.empty()) {
    if (!haveDot()) {
      printf("Graphviz 'dot' is not installed (apt install graphviz); %s not rendered\n", o.png.c_str());
      return 0;
    }
    if (!renderPng(dot, o.png)) {
      fprintf(stderr, "gyre-info: dot failed to render %s\n", o.png.c_str());
      return 1;
    }
    printf("picture written to %s\n", o.png.c_str());
  }
  return 0;
}
