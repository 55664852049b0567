// What this host's CPU is, as far as the planner's host thresholds care:
// vendor and family, the private (L2) and shared (L3) cache sizes, online
// cores and NUMA nodes. Read from /proc/cpuinfo and sysfs, which every Linux
// has; hwloc reports the same caches from the same files, so it adds nothing here.
#pragma once

#include <cstddef>
#include <string>

namespace gyre::topo {

enum class CpuVendor { Unknown, Intel, Amd };

struct CpuFacts {
  CpuVendor vendor = CpuVendor::Unknown;
  int family = 0;  // cpuid family as /proc/cpuinfo prints it ("cpu family")
  int model = 0;
  std::string modelName;  // "AMD EPYC", "Intel(R) Xeon(R) Platinum 8480C"
  size_t l2Bytes = 0;     // one core's L2 (0: unknown)
  size_t l3Bytes = 0;     // one L3 instance, shared by the cores under it (0: none or unknown)
  int cores = 0;          // online logical CPUs
  int numaNodes = 0;      // 0: unknown
};

const char* cpuVendorName(CpuVendor v);  // "Intel", "AMD", "unknown"

// This host's facts, read once per process.
const CpuFacts& hostCpuFacts();

// The pieces, for tests: the fields of /proc/cpuinfo's first processor, and a
// sysfs cache size ("512K", "32768K", "2M"; 0 if malformed).
void parseCpuInfo(const std::string& text, CpuFacts* out);
size_t parseCacheSize(const std::string& text);

}  // namespace gyre::topo
