// Choosing the network interface for bootstrap and socket traffic, following
// NCCL_SOCKET_IFNAME's syntax: a comma list of name prefixes; a leading '^'
// excludes the listed names; a leading '=' (after any '^') makes them exact.
#pragma once

#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/bootstrap/net_address.h"

namespace gyre {

struct InterfaceFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};

InterfaceFilter parseInterfaceFilter(const std::string& spec);
bool interfaceMatches(const InterfaceFilter& filter, const std::string& ifname);

struct Interface {
  std::string name;
  NetAddress address;
};

// Interfaces that are up, in the preference order NCCL uses when no filter is
// given: ordinary interfaces first, then loopback; docker and virbr bridges only
// when named. `family` is 0 (any), AF_INET or AF_INET6.
std::vector<Interface> candidateInterfaces(const InterfaceFilter& filter, bool filterGiven, int family);

// The interface to use per NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY.
ncclResult_t selectInterface(Interface* out);

}  // namespace gyre
