// Test helpers for the IB network on the fake provider (GYRE_IBVERBS_LIB):
// the provider's handle, and a sender and a receiver comm connected in one
// process, with a 1 MiB registered receive buffer.
#pragma once

#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <vector>

#include "src/debug/error.h"
#include "src/transport/ib/ib_comm.h"
#include "src/transport/ib/ib_net.h"
#include "src/transport/ib/verbs_api.h"

namespace gyre::ibtest {

inline void* fakeLib() {
  REQUIRE(ib::verbs(nullptr) != nullptr);  // loads the provider
  void* lib = dlopen(getenv("GYRE_IBVERBS_LIB"), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  return lib;
}

inline uint32_t lkeyOf(void* mhandle) { return static_cast<ib::IbMr*>(mhandle)->mr->lkey; }

// A sender and a receiver comm of the IB network, connected in this process.
struct Loop {
  const gyreNet_v8_t* api = nullptr;
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  std::vector<char> dst = std::vector<char>(1 << 20);
  void* dstMh = nullptr;

  Loop() {
    static Network net;
    std::string why;
    REQUIRE(probeIbNetwork(&net, &why) == ncclSuccess);
    INFO(why);
    REQUIRE(net.api != nullptr);
    api = net.api;
    char handle[GYRE_NET_HANDLE_MAXSIZE] = {};
    REQUIRE(api->listen(0, handle, &listen) == ncclSuccess);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    ncclResult_t r = ncclSuccess;
    while ((!send || !recv) && r == ncclSuccess && std::chrono::steady_clock::now() < until) {
      if (!send) r = api->connect(0, handle, &send, nullptr);
      if (!recv && r == ncclSuccess) r = api->accept(listen, &recv, nullptr);
    }
    INFO(lastErrorText());
    REQUIRE(r == ncclSuccess);
    REQUIRE(send != nullptr);
    REQUIRE(recv != nullptr);
    REQUIRE(api->regMr(recv, dst.data(), dst.size(), GYRE_NET_PTR_HOST, &dstMh) == ncclSuccess);
  }

  ~Loop() {
    api->deregMr(recv, dstMh);
    api->closeSend(send);
    api->closeRecv(recv);
    api->closeListen(listen);
  }

  // Sends `size` bytes of `src` (registered as `mh`) into `into` (registered
  // as `intoMh`, `capacity` bytes); returns the bytes received.
  int move(const void* src, int size, void* mh, void* into, void* intoMh, int capacity) {
    int tag = 0;
    void *rreq = nullptr, *sreq = nullptr;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    ncclResult_t r = ncclSuccess;
    while (!rreq && r == ncclSuccess && std::chrono::steady_clock::now() < until)
      r = api->irecv(recv, 1, &into, &capacity, &tag, &intoMh, &rreq);
    while (!sreq && r == ncclSuccess && std::chrono::steady_clock::now() < until)
      r = api->isend(send, const_cast<void*>(src), size, 0, mh, &sreq);
    INFO(lastErrorText());
    REQUIRE(r == ncclSuccess);
    REQUIRE(rreq != nullptr);
    REQUIRE(sreq != nullptr);
    int sdone = 0, rdone = 0, got = -1, sent = 0;
    while ((!sdone || !rdone) && r == ncclSuccess && std::chrono::steady_clock::now() < until) {
      if (!sdone) r = api->test(sreq, &sdone, &sent);
      if (!rdone && r == ncclSuccess) r = api->test(rreq, &rdone, &got);
    }
    INFO(lastErrorText());
    REQUIRE(r == ncclSuccess);
    REQUIRE(sdone);
    REQUIRE(rdone);
    return got;
  }

  // Sends `size` bytes of `src` (registered as `mh`) and returns what arrived.
  std::string transfer(const void* src, int size, void* mh) {
    const int got = move(src, size, mh, dst.data(), dstMh, static_cast<int>(dst.size()));
    REQUIRE(got == size);
    return std::string(dst.data(), static_cast<size_t>(size));
  }
};

}  // namespace gyre::ibtest
