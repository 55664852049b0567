#include "src/topology/cpu_facts.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gyre::topo {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return trim(s);
}

// The first processor's block only: /proc/cpuinfo repeats it per CPU, which
// on a large host is a megabyte of text.
std::string readFirstBlock(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  for (std::string line; std::getline(in, line) && !trim(line).empty();) text += line + "\n";
  return text;
}

// cpu0's unified/data caches by level: sysfs lists one index per cache.
void readCaches(CpuFacts* f) {
  const std::string base = "/sys/devices/system/cpu/cpu0/cache/";
  for (int i = 0; i < 16; ++i) {
    std::string dir = base + "index" + std::to_string(i) + "/";
    std::string level = readFirstLine(dir + "level");
    if (level.empty()) break;
    if (readFirstLine(dir + "type") == "Instruction") continue;
    size_t bytes = parseCacheSize(readFirstLine(dir + "size"));
    if (level == "2") f->l2Bytes = bytes;
    if (level == "3") f->l3Bytes = bytes;
  }
}

int countNumaNodes() {
  int n = 0;
  if (DIR* d = opendir("/sys/devices/system/node")) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("node", 0) == 0 && name.size() > 4 && isdigit(static_cast<unsigned char>(name[4]))) ++n;
    }
    closedir(d);
  }
  return n;
}

}  // namespace

const char* cpuVendorName(CpuVendor v) {
  switch (v) {
    case CpuVendor::Intel: return "Intel";
    case CpuVendor::Amd: return "AMD";
    case CpuVendor::Unknown: break;
  }
  return "unknown";
}

size_t parseCacheSize(const std::string& text) {
  std::string t = trim(text);
  if (t.empty() || !isdigit(static_cast<unsigned char>(t[0]))) return 0;
  char* end = nullptr;
  unsigned long long v = strtoull(t.c_str(), &end, 10);
  std::string unit = trim(end);
  if (unit.empty()) return v;
  if (unit == "K" || unit == "KiB" || unit == "KB") return v << 10;
  if (unit == "M" || unit == "MiB" || unit == "MB") return v << 20;
  return 0;
}

void parseCpuInfo(const std::string& text, CpuFacts* out) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (trim(line).empty()) break;  // the first processor's block ends here
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon));
    std::string value = trim(line.substr(colon + 1));
    if (key == "vendor_id")
      out->vendor = value == "GenuineIntel" ? CpuVendor::Intel
                    : value == "AuthenticAMD" ? CpuVendor::Amd
                                              : CpuVendor::Unknown;
    else if (key == "cpu family") out->family = atoi(value.c_str());
    else if (key == "model") out->model = atoi(value.c_str());
    else if (key == "model name") out->modelName = value;
  }
}

const CpuFacts& hostCpuFacts() {
  static const CpuFacts facts = [] {
    CpuFacts f;
    parseCpuInfo(readFirstBlock("/proc/cpuinfo"), &f);
    readCaches(&f);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    f.cores = n > 0 ? static_cast<int>(n) : 0;
    f.numaNodes = countNumaNodes();
    return f;
  }();
  return facts;
}

}  // namespace gyre::topo
