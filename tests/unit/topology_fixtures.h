// Loading the shipped topologies (tests/topologies/*.xml) from unit tests,
// wherever the build directory is: GYRE_TOPOLOGIES_DIR if set, else found by
// walking up from the test binary and from the working directory.
#pragma once

#include <unistd.h>

#include <climits>
#include <string>

#include <catch2/catch.hpp>

#include "src/debug/error.h"
#include "src/topology/xml.h"

namespace gyre::testing {

inline std::string topologiesDir() {
  if (const char* d = getenv("GYRE_TOPOLOGIES_DIR")) return d;
  std::vector<std::string> starts;
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) starts.emplace_back(buf, n);
  if (getcwd(buf, sizeof(buf))) starts.emplace_back(buf);
  // __FILE__ is relative to the build directory when meson compiles.
  std::string self = __FILE__;
  for (std::string dir : starts) {
    while (!dir.empty()) {
      for (std::string candidate : {dir + "/tests/topologies", dir + "/" + self.substr(0, self.rfind('/')) + "/../topologies"})
        if (access((candidate + "/dgx_h100.xml").c_str(), R_OK) == 0) return candidate;
      size_t slash = dir.rfind('/');
      if (slash == std::string::npos) break;
      dir = dir.substr(0, slash);
    }
  }
  return "tests/topologies";
}

inline topo::Topology loadShipped(const std::string& name) {
  topo::Topology t;
  std::string path = topologiesDir() + "/" + name;
  INFO("loading " << path);
  ncclResult_t rc = topo::loadTopologyFile(path, &t);
  INFO(lastErrorText());
  REQUIRE(rc == ncclSuccess);
  return t;
}

}  // namespace gyre::testing
