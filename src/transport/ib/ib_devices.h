// The HCA ports the IB network uses: every active port of every verbs device
// that NCCL_IB_HCA allows, with its address (LID, or the GID a RoCE port is
// reached by) chosen once per process.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <vector>

#include "include/gyre.h"

namespace gyre::ib {

struct IbPort {
  std::string device;  // "mlx5_0"
  int port = 1;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;  // one per device, shared by its ports
  uint16_t lid = 0;
  uint8_t linkLayer = IBV_LINK_LAYER_INFINIBAND;
  int gidIndex = 0;
  ibv_gid gid{};
  ibv_mtu mtu = IBV_MTU_1024;
  int speedMbps = 0;
  std::string label() const { return device + ":" + std::to_string(port); }
};

// Finds the ports (once per process). No verbs library or no active port is
// not an error: *ports stays empty and *whyNone says why. NCCL_IB_HCA that
// allows none of the active ports, or a GID index beyond a port's table, is.
ncclResult_t ibPorts(const std::vector<IbPort>** ports, std::string* whyNone);

}  // namespace gyre::ib
