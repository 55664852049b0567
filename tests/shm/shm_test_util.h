// Small helpers shared by the shared-memory transport's multi-process tests.
#pragma once

#include <dirent.h>
#include <sched.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace gyre::test {

// Mappings of shared-memory connection segments in this process (the memfds
// are named "gyre-shm-<from>-<to>-<channel>" and show in /proc/self/maps).
inline int countShmMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find("gyre-shm-") != std::string::npos ? 1 : 0;
  return n;
}

// Names in /dev/shm that gyre could have made.
inline std::vector<std::string> gyreEntriesInDevShm() {
  std::vector<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (strstr(e->d_name, "gyre") || strstr(e->d_name, "GYRE")) names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

inline std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s.empty() ? "(none)" : s;
}

inline uint64_t hashBytes(const void* data, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ull;
  return h;
}

// Restricts this process to the first `n` CPUs it may run on; false if it has fewer.
inline bool pinToFirstCpus(int n) {
  cpu_set_t allowed, pinned;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  CPU_ZERO(&pinned);
  int taken = 0;
  for (int c = 0; c < CPU_SETSIZE && taken < n; ++c)
    if (CPU_ISSET(c, &allowed)) {
      CPU_SET(c, &pinned);
      ++taken;
    }
  return taken == n && sched_setaffinity(0, sizeof(pinned), &pinned) == 0;
}

}  // namespace gyre::test
