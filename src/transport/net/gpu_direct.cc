#include "src/transport/net/gpu_direct.h"

#include <dlfcn.h>

namespace gyre {

GpuDirectChoice chooseGpuDirect(const GpuDirectInputs& in) {
  const std::string staged = "GPU buffers are staged through pinned host memory: ";
  if (!in.pathKnown) return {false, staged + "the topology shows no path from this rank's GPU to a NIC"};
  if (in.path > in.gdrLevel)
    return {false, staged + "the path " + in.gpu + " -> " + in.nic + " is " + topo::pathTypeName(in.path) +
                       ", beyond NCCL_NET_GDR_LEVEL=" + topo::pathTypeName(in.gdrLevel)};
  if (!in.networkDmabuf)
    return {false, staged + "network " + in.network + " takes no dma-buf registrations" +
                       (in.network == "IB" ? " (the verbs library has no ibv_reg_dmabuf_mr; rdma-core 34 or later)" : "")};
  if (!in.cudaWhyNot.empty()) return {false, staged + in.cudaWhyNot};
  if (!in.executorDirect)
    return {false, staged + "the device executor does not yet post device buffers to the network (the path " +
                       in.gpu + " -> " + in.nic + " is " + topo::pathTypeName(in.path) + " and would allow it)"};
  return {true, "GPU buffers are registered with " + in.nic + " directly (dma-buf; path " +
                    topo::pathTypeName(in.path) + " within NCCL_NET_GDR_LEVEL=" + topo::pathTypeName(in.gdrLevel) +
                    ")"};
}

std::string cudaDmabufWhyNot() {
  // Loaded once and kept, as the CUDA runtime keeps it.
  static void* const lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "no CUDA driver (libcuda.so.1) to export device memory as a dma-buf";
  if (!dlsym(lib, "cuMemGetHandleForAddressRange"))
    return "the CUDA driver has no cuMemGetHandleForAddressRange (CUDA 11.7 or later exports dma-bufs)";
  return "";
}

}  // namespace gyre
