#include "src/transport/ib/hca_filter.h"

#include <cstdlib>

#include "src/debug/error.h"

namespace gyre::ib {

ncclResult_t parseHcaFilter(const std::string& spec, HcaFilter* out) {
  *out = HcaFilter{};
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') {
    out->exclude = true;
    ++pos;
  }
  if (pos < spec.size() && spec[pos] == '=') {
    out->exact = true;
    ++pos;
  }
  if (pos == spec.size()) {
    if (pos == 0) return ncclSuccess;  // unset: every device
    return fail(ncclInvalidArgument, "NCCL_IB_HCA=%s: no device names after the prefix", spec.c_str());
  }
  std::string rest = spec.substr(pos);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    HcaFilter::Entry e;
    size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (e.name.empty())
      return fail(ncclInvalidArgument, "NCCL_IB_HCA=%s: empty device name in \"%s\" (expected name[:port],...)",
                  spec.c_str(), item.c_str());
    if (colon != std::string::npos) {
      const std::string p = item.substr(colon + 1);
      char* end = nullptr;
      long port = p.empty() ? 0 : strtol(p.c_str(), &end, 10);
      if (p.empty() || *end != '\0' || port < 1 || port > 255)
        return fail(ncclInvalidArgument, "NCCL_IB_HCA=%s: \"%s\" is not a port number (1..255) in \"%s\"",
                    spec.c_str(), p.c_str(), item.c_str());
      e.port = static_cast<int>(port);
    }
    out->entries.push_back(e);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ncclSuccess;
}

bool hcaAllowed(const HcaFilter& f, const std::string& name, int port) {
  if (f.entries.empty()) return true;
  bool matched = false;
  for (const HcaFilter::Entry& e : f.entries) {
    const bool nameOk = f.exact ? name == e.name : name.compare(0, e.name.size(), e.name) == 0;
    if (nameOk && (e.port < 0 || e.port == port)) matched = true;
  }
  return f.exclude ? !matched : matched;
}

}  // namespace gyre::ib
