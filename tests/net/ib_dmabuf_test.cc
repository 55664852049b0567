// GPU memory registered directly (regMrDmaBuf -> ibv_reg_dmabuf_mr) on the
// fake provider: a memfd stands in for the dma-buf the CUDA driver would
// export for device memory, and an address no process mapping holds stands
// in for the device pointer (the region's iova). Sends from and receives
// into such regions carry the bytes of the descriptor's memory. There is no
// GPU or RDMA hardware here: this checks gyre's verbs calls against the
// fake, not GPUDirect RDMA.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "ib_loop.h"

using namespace gyre;
using namespace gyre::ibtest;

namespace {

long fakeDmabufMrs() {
  auto f = reinterpret_cast<long (*)()>(dlsym(fakeLib(), "fakeverbs_dmabuf_mrs"));
  REQUIRE(f != nullptr);
  return f();
}

// A memfd of `size` bytes filled with `fill`, and its mapping.
int memfdFilled(size_t size, char fill, char** mapped) {
  const int fd = memfd_create("gyre-dmabuf-test", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, static_cast<off_t>(size)) == 0);
  void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(m != MAP_FAILED);
  memset(m, fill, size);
  *mapped = static_cast<char*>(m);
  return fd;
}

}  // namespace

TEST_CASE("the IB network advertises dma-buf registration when the verbs library has ibv_reg_dmabuf_mr",
          "[dmabuf]") {
  Loop loop;
  gyreNetProperties_v8_t props{};
  REQUIRE(loop.api->getProperties(0, &props) == ncclSuccess);
  CHECK((props.ptrSupport & GYRE_NET_PTR_HOST) != 0);
  CHECK((props.ptrSupport & GYRE_NET_PTR_DMABUF) != 0);
}

TEST_CASE("a dma-buf region sends the descriptor's bytes and receives into them, and is deregistered", "[dmabuf]") {
  const size_t size = 64 * 1024;
  const long before = fakeDmabufMrs();
  {
    Loop loop;
    // Device pointers as the network sees them: addresses of no mapping here.
    void* const srcIova = reinterpret_cast<void*>(uintptr_t{0x7e0000000000});
    void* const dstIova = reinterpret_cast<void*>(uintptr_t{0x7e0100000000});
    char *srcMem = nullptr, *dstMem = nullptr;
    const int srcFd = memfdFilled(size, 'G', &srcMem);
    const int dstFd = memfdFilled(size + 4096, 0, &dstMem);

    void *srcMh = nullptr, *dstMh = nullptr;
    REQUIRE(loop.api->regMrDmaBuf(loop.send, srcIova, size, GYRE_NET_PTR_CUDA, 0, srcFd, &srcMh) == ncclSuccess);
    // At an offset into its descriptor, as a suballocation of a larger block is.
    REQUIRE(loop.api->regMrDmaBuf(loop.recv, dstIova, size, GYRE_NET_PTR_CUDA, 4096, dstFd, &dstMh) ==
            ncclSuccess);
    CHECK(fakeDmabufMrs() == before + 2);

    // From device memory into host memory...
    CHECK(loop.transfer(srcIova, static_cast<int>(size), srcMh) == std::string(size, 'G'));
    // ...and into device memory: the bytes land in the descriptor at its offset.
    std::vector<char> host(size, 'H');
    void* hostMh = nullptr;
    REQUIRE(loop.api->regMr(loop.send, host.data(), host.size(), GYRE_NET_PTR_HOST, &hostMh) == ncclSuccess);
    CHECK(loop.move(host.data(), static_cast<int>(size), hostMh, dstIova, dstMh, static_cast<int>(size)) ==
          static_cast<int>(size));
    CHECK(std::string(dstMem + 4096, size) == std::string(size, 'H'));
    CHECK(std::string(dstMem, 4096) == std::string(4096, '\0'));

    REQUIRE(loop.api->deregMr(loop.send, hostMh) == ncclSuccess);
    REQUIRE(loop.api->deregMr(loop.send, srcMh) == ncclSuccess);
    REQUIRE(loop.api->deregMr(loop.recv, dstMh) == ncclSuccess);
    munmap(srcMem, size);
    munmap(dstMem, size + 4096);
    close(srcFd);
    close(dstFd);
  }
  CHECK(fakeDmabufMrs() == before);
}

TEST_CASE("ibv_reg_dmabuf_mr failing is an error naming the device, the descriptor and the errno text", "[dmabuf]") {
  Loop loop;
  void* mh = nullptr;
  REQUIRE(loop.api->regMrDmaBuf(loop.send, reinterpret_cast<void*>(uintptr_t{0x7e0000000000}), 4096,
                                GYRE_NET_PTR_CUDA, 0, -1, &mh) == ncclSystemError);
  const std::string e = lastErrorText();
  INFO(e);
  CHECK(e.find("ibv_reg_dmabuf_mr") != std::string::npos);
  CHECK(e.find("fd -1") != std::string::npos);
  CHECK(e.find("fake_ib0:1") != std::string::npos);
  CHECK(e.find(strerror(EBADF)) != std::string::npos);
}
