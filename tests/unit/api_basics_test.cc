// Single-process checks of the C API surface: version, error strings, the
// error text contract, and argument validation that needs no peers.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>

#include "nccl.h"

TEST_CASE("ncclGetVersion reports the NCCL API level gyre implements") {
  int v = 0;
  REQUIRE(ncclGetVersion(&v) == ncclSuccess);
  CHECK(v == NCCL_VERSION_CODE);
  CHECK(v == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  CHECK(ncclGetVersion(nullptr) == ncclInvalidArgument);
}

TEST_CASE("every result code has its own error string") {
  for (int r = 0; r < ncclNumResults; ++r) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(r));
    REQUIRE(s != nullptr);
    CHECK(std::strlen(s) > 0);
    for (int o = 0; o < r; ++o) CHECK(std::string(s) != ncclGetErrorString(static_cast<ncclResult_t>(o)));
  }
  CHECK(std::string(ncclGetErrorString(static_cast<ncclResult_t>(99))) == "unknown result code");
}

TEST_CASE("the ABI facts match NCCL's") {
  CHECK(sizeof(ncclUniqueId) == 128);
  CHECK(ncclFloat8e5m2 == 11);
  CHECK(ncclNumTypes == 12);
  CHECK(ncclAvg == 4);
  CHECK(ncclRemoteError == 6);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  CHECK(config.size == sizeof(ncclConfig_t));
  CHECK(config.magic == 0xcafebeef);
  CHECK(config.blocking == NCCL_CONFIG_UNDEF_INT);
}

TEST_CASE("init with bad arguments fails with a message naming the argument") {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  ncclComm_t comm = nullptr;
  CHECK(gyreCommInitRankHost(nullptr, 1, id, 0, nullptr) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("comm") != std::string::npos);
  CHECK(gyreCommInitRankHost(&comm, 0, id, 0, nullptr) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("nranks") != std::string::npos);
  CHECK(gyreCommInitRankHost(&comm, 2, id, 2, nullptr) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("rank=2") != std::string::npos);
  CHECK(gyreCommInitRankHost(&comm, 2, id, 0, nullptr) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("unique id") != std::string::npos);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;
  CHECK(gyreCommInitRankHost(&comm, 1, id, 0, &config) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("NCCL_CONFIG_INITIALIZER") != std::string::npos);
  CHECK(comm == nullptr);
}

TEST_CASE("calls on a NULL communicator fail instead of crashing") {
  int x = 0;
  CHECK(ncclCommCount(nullptr, &x) == ncclInvalidArgument);
  CHECK(ncclCommUserRank(nullptr, &x) == ncclInvalidArgument);
  CHECK(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, nullptr, nullptr) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("comm") != std::string::npos);
  CHECK(ncclCommDestroy(nullptr) == ncclSuccess);
}

TEST_CASE("a single-rank host communicator reduces, checks arguments and cleans up") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  REQUIRE(gyreCommInitRankHost(&comm, 1, id, 0, nullptr) == ncclSuccess);
  int n = -1, r = -1, dev = 0, isHost = 0;
  CHECK(ncclCommCount(comm, &n) == ncclSuccess);
  CHECK(ncclCommUserRank(comm, &r) == ncclSuccess);
  CHECK(ncclCommCuDevice(comm, &dev) == ncclSuccess);
  CHECK(gyreCommIsHost(comm, &isHost) == ncclSuccess);
  CHECK((n == 1 && r == 0 && dev == -1 && isHost == 1));

  int32_t in[5] = {1, -2, 3, -4, 5}, out[5] = {};
  REQUIRE(ncclAllReduce(in, out, 5, ncclInt32, ncclAvg, comm, nullptr) == ncclSuccess);
  for (int i = 0; i < 5; ++i) CHECK(out[i] == in[i]);

  auto lastError = [] { return std::string(ncclGetLastError(nullptr)); };
  CHECK(ncclAllReduce(nullptr, out, 5, ncclInt32, ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("sendbuff") != std::string::npos);
  CHECK(ncclAllReduce(in, nullptr, 5, ncclInt32, ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("recvbuff") != std::string::npos);
  CHECK(ncclAllReduce(in, out, 5, static_cast<ncclDataType_t>(99), ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("datatype") != std::string::npos);
  CHECK(ncclAllReduce(in, out, 5, ncclInt32, static_cast<ncclRedOp_t>(42), comm, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("op") != std::string::npos);
  CHECK(ncclAllReduce(in, out, SIZE_MAX / 2, ncclInt32, ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("count") != std::string::npos);
  CHECK(ncclAllReduce(in, out, 5, ncclInt32, ncclSum, comm, reinterpret_cast<cudaStream_t>(0x10)) ==
        ncclInvalidArgument);
  CHECK(lastError().find("stream") != std::string::npos);
  CHECK(ncclAllReduce(reinterpret_cast<char*>(in) + 1, out, 2, ncclInt32, ncclSum, comm, nullptr) ==
        ncclInvalidArgument);
  CHECK(lastError().find("aligned") != std::string::npos);
  CHECK(ncclAllReduce(in, in + 1, 3, ncclInt32, ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("overlap") != std::string::npos);
  CHECK(ncclAllReduce(nullptr, nullptr, 0, ncclInt32, ncclSum, comm, nullptr) == ncclSuccess);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("ncclCommInitRank without a usable GPU explains what to use instead") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, 1, id, 0);
  if (r == ncclSuccess) {
    // A GPU is present: the communicator is a device one.
    int dev = -1;
    CHECK(ncclCommCuDevice(comm, &dev) == ncclSuccess);
    CHECK(dev >= 0);
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
  } else {
    CHECK(std::string(ncclGetLastError(nullptr)).find("gyreCommInitRankHost") != std::string::npos);
    CHECK(comm == nullptr);
  }
}

TEST_CASE("gyreCommSetTimeout takes seconds in (0, 86400] and names a bad value") {
  CHECK(gyreCommSetTimeout(nullptr, 5) == ncclInvalidArgument);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  REQUIRE(gyreCommInitRankHost(&comm, 1, id, 0, nullptr) == ncclSuccess);
  CHECK(gyreCommSetTimeout(comm, 2.5) == ncclSuccess);
  CHECK(gyreCommSetTimeout(comm, 86400) == ncclSuccess);
  for (double bad : {0.0, -1.0, 86401.0, std::nan("")}) {
    CHECK(gyreCommSetTimeout(comm, bad) == ncclInvalidArgument);
    CHECK(std::string(ncclGetLastError(nullptr)).find("seconds=") != std::string::npos);
  }
  int32_t x = 7;
  CHECK(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr) == ncclSuccess);
  CHECK(x == 7);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("gyreMemcpyStreaming copies like memcpy and names a NULL or overlapping buffer") {
  std::string src(3 * 4096 + 77, '\0'), dst(src.size(), '\0');
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  // Unaligned at both ends: the streaming loop's head and tail.
  CHECK(gyreMemcpyStreaming(&dst[5], &src[9], src.size() - 20) == ncclSuccess);
  CHECK(std::memcmp(&dst[5], &src[9], src.size() - 20) == 0);
  CHECK(dst[4] == 0);
  CHECK(gyreMemcpyStreaming(nullptr, src.data(), 0) == ncclSuccess);
  CHECK(gyreMemcpyStreaming(nullptr, src.data(), 8) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("dst is NULL") != std::string::npos);
  CHECK(gyreMemcpyStreaming(&src[0], &src[100], 200) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("overlap") != std::string::npos);
}
