// The calls every observability test makes on a 2-rank host communicator,
// each checked against values computed here: an AllReduce twice in a row
// (the second repeats the first's plan), a zero-count AllReduce, Broadcast
// from rank 1, Reduce (max) to rank 0, AllGather, ReduceScatter, and a group
// with one Send and one Recv to the other rank. kScript lists them for the
// checks of what was observed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fork_ranks.h"
#include "gyre.h"

namespace gyre::test {

struct ScriptedCall {
  const char* api;      // NCCL's name, as NVTX ranges and counters show it
  const char* func;     // as profiler events name it
  size_t count;
  size_t typeSize;
  ncclDataType_t type;
  const char* typeName;  // gyre's (NVTX payload)
  const char* op;        // "" without one
  int root;              // -1: none; Send/Recv: the peer (the other rank: filled in at run time as 1 - rank)
  bool grouped;
  bool p2p;
};

inline const std::vector<ScriptedCall>& script() {
  static const std::vector<ScriptedCall> calls = {
      {"ncclAllReduce", "AllReduce", 7, 4, ncclInt32, "int32", "sum", -1, false, false},
      {"ncclAllReduce", "AllReduce", 7, 4, ncclInt32, "int32", "sum", -1, false, false},
      {"ncclAllReduce", "AllReduce", 0, 4, ncclFloat32, "float32", "sum", -1, false, false},
      {"ncclBroadcast", "Broadcast", 13, 4, ncclInt32, "int32", "", 1, false, false},
      {"ncclReduce", "Reduce", 5, 4, ncclInt32, "int32", "max", 0, false, false},
      {"ncclAllGather", "AllGather", 3, 4, ncclInt32, "int32", "", -1, false, false},
      {"ncclReduceScatter", "ReduceScatter", 4, 4, ncclInt32, "int32", "sum", -1, false, false},
      {"ncclSend", "Send", 11, 8, ncclFloat64, "float64", "", -2, true, true},
      {"ncclRecv", "Recv", 11, 8, ncclFloat64, "float64", "", -2, true, true},
  };
  return calls;
}

// A rank's value at element i of its input (distinct per rank and element).
inline int32_t inputValue(int rank, size_t i) { return static_cast<int32_t>(1000 * (rank + 1) + 7 * i + 3); }

#define SCRIPT_CHECK(cond, ...) \
  do {                          \
    if (!(cond)) {              \
      rankFail(__VA_ARGS__);    \
      return false;             \
    }                           \
  } while (0)

// Runs the script on rank `rank` of 2; false (after rankFail) on a wrong result or error.
inline bool runCallScript(ncclComm_t comm, int rank) {
  const int n = 2, peer = 1 - rank;
  auto ok = [&](ncclResult_t r, const char* what) {
    if (r != ncclSuccess) rankFail("rank %d: %s returned %d: %s", rank, what, int(r), ncclGetLastError(nullptr));
    return r == ncclSuccess;
  };
  std::vector<int32_t> in(64), out(64);
  for (size_t i = 0; i < in.size(); ++i) in[i] = inputValue(rank, i);
  for (int repeat = 0; repeat < 2; ++repeat) {
    std::fill(out.begin(), out.end(), -1);
    if (!ok(ncclAllReduce(in.data(), out.data(), 7, ncclInt32, ncclSum, comm, nullptr), "ncclAllReduce")) return false;
    for (size_t i = 0; i < 7; ++i)
      SCRIPT_CHECK(out[i] == inputValue(0, i) + inputValue(1, i), "rank %d: AllReduce element %zu is %d", rank, i,
                   out[i]);
  }
  float f = 0;
  if (!ok(ncclAllReduce(&f, &f, 0, ncclFloat32, ncclSum, comm, nullptr), "ncclAllReduce of 0")) return false;

  std::fill(out.begin(), out.end(), -1);
  if (!ok(ncclBroadcast(in.data(), out.data(), 13, ncclInt32, 1, comm, nullptr), "ncclBroadcast")) return false;
  for (size_t i = 0; i < 13; ++i)
    SCRIPT_CHECK(out[i] == inputValue(1, i), "rank %d: Broadcast element %zu is %d", rank, i, out[i]);

  std::fill(out.begin(), out.end(), -1);
  if (!ok(ncclReduce(in.data(), out.data(), 5, ncclInt32, ncclMax, 0, comm, nullptr), "ncclReduce")) return false;
  if (rank == 0)
    for (size_t i = 0; i < 5; ++i)
      SCRIPT_CHECK(out[i] == std::max(inputValue(0, i), inputValue(1, i)), "rank 0: Reduce element %zu is %d", i,
                   out[i]);

  std::fill(out.begin(), out.end(), -1);
  if (!ok(ncclAllGather(in.data(), out.data(), 3, ncclInt32, comm, nullptr), "ncclAllGather")) return false;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < 3; ++i)
      SCRIPT_CHECK(out[r * 3 + i] == inputValue(r, i), "rank %d: AllGather block %d element %zu is %d", rank, r, i,
                   out[r * 3 + i]);

  std::fill(out.begin(), out.end(), -1);
  if (!ok(ncclReduceScatter(in.data(), out.data(), 4, ncclInt32, ncclSum, comm, nullptr), "ncclReduceScatter"))
    return false;
  for (size_t i = 0; i < 4; ++i) {
    const size_t at = rank * 4 + i;
    SCRIPT_CHECK(out[i] == inputValue(0, at) + inputValue(1, at), "rank %d: ReduceScatter element %zu is %d", rank,
                 i, out[i]);
  }

  std::vector<double> send(11), recv(11, -1);
  for (size_t i = 0; i < send.size(); ++i) send[i] = rank * 0.5 + i;
  if (!ok(ncclGroupStart(), "ncclGroupStart")) return false;
  if (!ok(ncclSend(send.data(), 11, ncclFloat64, peer, comm, nullptr), "ncclSend")) return false;
  if (!ok(ncclRecv(recv.data(), 11, ncclFloat64, peer, comm, nullptr), "ncclRecv")) return false;
  if (!ok(ncclGroupEnd(), "ncclGroupEnd")) return false;
  for (size_t i = 0; i < recv.size(); ++i)
    SCRIPT_CHECK(recv[i] == peer * 0.5 + i, "rank %d: received element %zu is %g", rank, i, recv[i]);
  return true;
}

}  // namespace gyre::test
