// The choice between GPU buffers registered with the NIC directly and
// staging through host memory (src/transport/net/gpu_direct.h): each missing
// condition is named, in order, and only all of them together give direct.
#include <catch2/catch.hpp>

#include <string>

#include "src/transport/net/gpu_direct.h"

using namespace gyre;
using topo::PathType;

namespace {

// Everything present: a PIX path to mlx5_0, IB with dma-buf, a CUDA driver
// that exports, an executor that posts device buffers.
GpuDirectInputs everything() {
  GpuDirectInputs in;
  in.pathKnown = true;
  in.path = PathType::PIX;
  in.gpu = "gpu0";
  in.nic = "mlx5_0";
  in.gdrLevel = PathType::PXB;
  in.network = "IB";
  in.networkDmabuf = true;
  in.cudaWhyNot = "";
  in.executorDirect = true;
  return in;
}

bool says(const GpuDirectChoice& c, const std::string& text) {
  INFO(c.why);
  return c.why.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("GPU buffers go to the NIC directly only when the path, the network, the driver and the executor allow",
          "[gpudirect]") {
  GpuDirectChoice c = chooseGpuDirect(everything());
  CHECK(c.direct);
  CHECK(says(c, "registered with mlx5_0 directly"));
  CHECK(says(c, "PIX within NCCL_NET_GDR_LEVEL=PXB"));
}

TEST_CASE("a GPU-NIC path beyond NCCL_NET_GDR_LEVEL stages, naming the path and the level", "[gpudirect]") {
  GpuDirectInputs in = everything();
  in.path = PathType::SYS;
  GpuDirectChoice c = chooseGpuDirect(in);
  CHECK_FALSE(c.direct);
  CHECK(says(c, "staged through pinned host memory"));
  CHECK(says(c, "gpu0 -> mlx5_0 is SYS, beyond NCCL_NET_GDR_LEVEL=PXB"));
  in.gdrLevel = PathType::SYS;
  CHECK(chooseGpuDirect(in).direct);
}

TEST_CASE("each missing piece of GPUDirect RDMA is the reason given for staging", "[gpudirect]") {
  GpuDirectInputs noNic = everything();
  noNic.pathKnown = false;
  CHECK(says(chooseGpuDirect(noNic), "no path from this rank's GPU to a NIC"));

  GpuDirectInputs noVerbs = everything();
  noVerbs.networkDmabuf = false;
  CHECK(says(chooseGpuDirect(noVerbs), "network IB takes no dma-buf registrations"));
  CHECK(says(chooseGpuDirect(noVerbs), "ibv_reg_dmabuf_mr"));

  GpuDirectInputs noDriver = everything();
  noDriver.cudaWhyNot = "no CUDA driver (libcuda.so.1) to export device memory as a dma-buf";
  CHECK(says(chooseGpuDirect(noDriver), "no CUDA driver"));

  GpuDirectInputs staged = everything();
  staged.executorDirect = false;
  GpuDirectChoice c = chooseGpuDirect(staged);
  CHECK_FALSE(c.direct);
  CHECK(says(c, "does not yet post device buffers"));
  CHECK(says(c, "would allow it"));
}

TEST_CASE("the CUDA driver's dma-buf export is looked up, and its absence explained", "[gpudirect]") {
  const std::string why = cudaDmabufWhyNot();
  INFO(why);
  // Either the driver exports dma-bufs, or the text says which part is missing.
  CHECK((why.empty() || why.find("libcuda.so.1") != std::string::npos ||
         why.find("cuMemGetHandleForAddressRange") != std::string::npos));
}
