// Per-communicator counters: for each API function, how many calls, how
// many bytes (count x datatype size, the caller's message as NCCL's NVTX
// payloads count it) and how long the calls took on the calling thread; for
// each collective the path the host executor ran it on. Written by the
// thread using the communicator with plain relaxed stores (no locked
// instruction on the per-call path; concurrent calls on one communicator
// are not allowed by the API anyway), read at any time by others.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "src/call/coll_kind.h"

namespace gyre {

// The API functions counted: the collectives, and Send and Recv apart.
enum class ApiFunc : uint8_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv, Count };
constexpr int kApiFuncs = static_cast<int>(ApiFunc::Count);

inline ApiFunc apiFuncOf(CollKind coll, bool isSend) {
  if (coll == CollKind::SendRecv) return isSend ? ApiFunc::Send : ApiFunc::Recv;
  return static_cast<ApiFunc>(coll);  // CollKind numbers the collectives in the same order
}
const char* apiFuncName(ApiFunc f);  // "ncclAllReduce", ...

// How the host executor ran a collective (src/host/run_calls.cc, from the plan).
enum class ExecPath : uint8_t { Ring, Tree, Direct, Doubling, SingleCopy, PointToPoint, Count };
constexpr int kExecPaths = static_cast<int>(ExecPath::Count);
const char* execPathName(ExecPath p);  // "Ring", ...

class Counter {
 public:
  void add(uint64_t n) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

struct CallCounters {
  Counter calls, bytes;
  Counter ticks;          // calls outside a group: the whole call, on the calling thread
  Counter groupedCalls;   // of `calls`, those made inside a group (timed with their group)
  Counter pathCalls[kExecPaths];
  Counter pathBytes[kExecPaths];
};

struct CommCounters {
  CallCounters api[kApiFuncs];
  Counter groups, groupTicks;  // outermost ncclGroupEnd calls that ran work of this communicator
};

// A copy in plain numbers, times in seconds.
struct CounterSnapshot {
  struct Func {
    uint64_t calls = 0, bytes = 0, groupedCalls = 0;
    double seconds = 0;
    uint64_t pathCalls[kExecPaths] = {}, pathBytes[kExecPaths] = {};
  } api[kApiFuncs];
  uint64_t groups = 0;
  double groupSeconds = 0;
};
CounterSnapshot snapshotOf(const CommCounters& c);

// One line per API function that was called, e.g.
// "ncclAllReduce: 12 calls, 48 KiB, 0.153 ms (Ring 10 calls 40 KiB, Doubling 2 calls 8 KiB)";
// then the groups line, if any ran.
std::vector<std::string> describeCounters(const CounterSnapshot& s);

}  // namespace gyre
