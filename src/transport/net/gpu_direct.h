// Whether a device communicator's GPU buffers go to the NIC directly
// (GPUDirect RDMA: device memory exported as a dma-buf by the CUDA driver,
// cuMemGetHandleForAddressRange, and registered with the network's
// regMrDmaBuf, ibv_reg_dmabuf_mr for IB) or are staged through pinned host
// memory. Direct needs all of: a GPU-NIC path no farther than
// NCCL_NET_GDR_LEVEL, a network that takes dma-buf registrations
// (GYRE_NET_PTR_DMABUF), a CUDA driver that exports dma-bufs, and an
// executor that posts device buffers to the network. The first one missing
// is the reason given.
//
// Untested on hardware: there is no GPU with an HCA on the development or CI
// machines; IB's dma-buf registration runs against the fake verbs provider
// (ib_dmabuf test), and no device buffer is exported or posted yet.
#pragma once

#include <string>

#include "src/topology/paths.h"

namespace gyre {

struct GpuDirectInputs {
  bool pathKnown = false;  // the topology has the GPU and a NIC
  topo::PathType path = topo::PathType::SYS;
  std::string gpu, nic;  // node names, for the message
  topo::PathType gdrLevel = topo::PathType::PXB;
  std::string network;  // "IB", or a plugin's name
  bool networkDmabuf = false;  // its ptrSupport has GYRE_NET_PTR_DMABUF
  std::string cudaWhyNot;  // "" when the CUDA driver exports dma-bufs
  bool executorDirect = false;
};

struct GpuDirectChoice {
  bool direct = false;
  std::string why;  // the whole INFO line's reason
};

GpuDirectChoice chooseGpuDirect(const GpuDirectInputs& in);

// "" when the CUDA driver (libcuda.so.1) has cuMemGetHandleForAddressRange,
// else why not. Whether the GPU itself supports dma-buf is not asked here
// (that needs cuInit and a device attribute).
std::string cudaDmabufWhyNot();

}  // namespace gyre
