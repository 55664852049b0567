#include "src/bootstrap/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {

InterfaceFilter parseInterfaceFilter(const std::string& spec) {
  InterfaceFilter f;
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') {
    f.exclude = true;
    ++pos;
  }
  if (pos < spec.size() && spec[pos] == '=') {
    f.exact = true;
    ++pos;
  }
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string name = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!name.empty()) f.names.push_back(name);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return f;
}

bool interfaceMatches(const InterfaceFilter& f, const std::string& ifname) {
  bool listed = std::any_of(f.names.begin(), f.names.end(), [&](const std::string& n) {
    return f.exact ? ifname == n : ifname.compare(0, n.size(), n) == 0;
  });
  return f.exclude ? !listed : listed;
}

std::vector<Interface> candidateInterfaces(const InterfaceFilter& filter, bool filterGiven, int family) {
  std::vector<Interface> normal, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (family != 0 && fam != family) continue;
    Interface itf{ifa->ifa_name, NetAddress(ifa->ifa_addr)};
    if (itf.address.isLinkLocalV6()) continue;  // needs a scope per peer; never usable across hosts
    if (filterGiven) {
      if (!interfaceMatches(filter, itf.name)) continue;
    } else if (itf.name.rfind("docker", 0) == 0 || itf.name.rfind("virbr", 0) == 0) {
      continue;
    }
    bool isLo = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    (isLo ? loopback : normal).push_back(itf);
  }
  freeifaddrs(list);
  // Without a filter, loopback is the last resort; with one, the user chose.
  if (!filterGiven && !normal.empty()) return normal;
  normal.insert(normal.end(), loopback.begin(), loopback.end());
  return normal;
}

ncclResult_t selectInterface(Interface* out) {
  std::string spec = env::getString("NCCL_SOCKET_IFNAME");
  std::string famName = env::getString("NCCL_SOCKET_FAMILY");
  int family = famName == "AF_INET" ? AF_INET : famName == "AF_INET6" ? AF_INET6 : 0;
  InterfaceFilter filter = parseInterfaceFilter(spec);
  std::vector<Interface> found = candidateInterfaces(filter, !spec.empty(), family);
  if (found.empty())
    return fail(ncclSystemError, "no usable network interface matches NCCL_SOCKET_IFNAME=\"%s\"%s%s",
                spec.c_str(), famName.empty() ? "" : " NCCL_SOCKET_FAMILY=", famName.c_str());
  *out = found.front();
  GYRE_INFO("INIT", "using interface %s %s", out->name.c_str(), out->address.toString().c_str());
  return ncclSuccess;
}

}  // namespace gyre
