// NCCL_IB_HCA in NCCL's syntax: a comma list of HCA names, each optionally
// ":port"; names are prefixes unless the list starts with '=' (after an
// optional '^'), and a leading '^' excludes what the list matches.
//   "mlx5"            every mlx5_* device, every port
//   "=mlx5_0:1"       exactly mlx5_0, port 1
//   "^mlx5_1,mlx5_2:2" all but mlx5_1 and port 2 of mlx5_2
#pragma once

#include <string>
#include <vector>

#include "include/gyre.h"

namespace gyre::ib {

struct HcaFilter {
  bool exclude = false;
  bool exact = false;
  struct Entry {
    std::string name;
    int port = -1;  // -1: every port
  };
  std::vector<Entry> entries;  // empty: every device
};

// A malformed spec (an empty name, a port that is not a positive number) is
// an error naming NCCL_IB_HCA and the value.
ncclResult_t parseHcaFilter(const std::string& spec, HcaFilter* out);

// Whether port `port` of device `name` may be used.
bool hcaAllowed(const HcaFilter& f, const std::string& name, int port);

}  // namespace gyre::ib
