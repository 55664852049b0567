// core_exchange: the floor under a small 2-rank call on shared memory. Two
// threads, pinned to the first two CPUs, exchange `size` bytes per round as
// a 2-rank AllGather does with no library around it: each writes its payload
// into its side of a shared area and stores a flag, waits for the other's
// flag, and takes the other's payload out.
//
//   core_exchange [rounds]
//
// For each payload size it prints µs per round of three ways to take the
// payload: `copy` (memcpy out of a payload block after one flag line, gyre's
// layout), `reduce` (float sum of the block and a local buffer into dst, as a
// 2-rank AllReduce step), `lines` (a flag in every 64-byte line beside 56
// bytes of payload, a host "LL" protocol). A library's small calls cannot
// beat the `copy` column: it is the floor under a small 2-rank call.
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

constexpr int kBlocks = 16;
constexpr size_t kMaxBytes = 2048;
constexpr size_t kLinePayload = 56;

struct alignas(64) FlagLine {
  uint64_t seq;
  char pad[56];
};
struct Side {
  FlagLine flags[kBlocks];
  alignas(64) char blocks[kBlocks][kMaxBytes];
  alignas(64) char lines[kBlocks][(kMaxBytes / kLinePayload + 1) * 64];
};

enum class Way { kCopy, kReduce, kLines };

struct Exchange {
  Side* side[2];
  Way way;
  size_t bytes;
  long rounds;
};

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);  // best effort
}

double nowUs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

void waitFor(const uint64_t* flag, uint64_t value) {
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < value) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

void run(const Exchange& x, int me, double* usPerRound) {
  pin(me);
  Side* mine = x.side[me];
  const Side* theirs = x.side[1 - me];
  // A line's last 56 bytes run past kMaxBytes: room for them.
  constexpr size_t kFloats = (kMaxBytes + kLinePayload) / sizeof(float);
  alignas(64) float src[kFloats];
  alignas(64) float dst[kFloats];
  for (size_t i = 0; i < kFloats; ++i) src[i] = float(me + i);
  const double start = nowUs();
  for (long r = 0; r < x.rounds; ++r) {
    const int b = static_cast<int>(r % kBlocks);
    const uint64_t seq = static_cast<uint64_t>(r) + 1;
    if (x.way == Way::kLines) {
      const size_t units = (x.bytes + kLinePayload - 1) / kLinePayload;
      for (size_t u = 0; u < units; ++u) {
        char* line = mine->lines[b] + u * 64;
        memcpy(line, reinterpret_cast<const char*>(src) + u * kLinePayload, kLinePayload);
        __atomic_store_n(reinterpret_cast<uint64_t*>(line + kLinePayload), seq, __ATOMIC_RELEASE);
      }
      for (size_t u = 0; u < units; ++u) {
        const char* line = theirs->lines[b] + u * 64;
        waitFor(reinterpret_cast<const uint64_t*>(line + kLinePayload), seq);
        memcpy(reinterpret_cast<char*>(dst) + u * kLinePayload, line, kLinePayload);
      }
      continue;
    }
    memcpy(mine->blocks[b], src, x.bytes);
    __atomic_store_n(&mine->flags[b].seq, seq, __ATOMIC_RELEASE);
    waitFor(&theirs->flags[b].seq, seq);
    if (x.way == Way::kCopy) {
      memcpy(dst, theirs->blocks[b], x.bytes);
    } else {
      const float* in = reinterpret_cast<const float*>(theirs->blocks[b]);
      for (size_t i = 0; i < x.bytes / sizeof(float); ++i) dst[i] = src[i] + in[i];
    }
  }
  *usPerRound = (nowUs() - start) / static_cast<double>(x.rounds);
  volatile float sink = dst[0];
  (void)sink;
}

double measure(Way way, size_t bytes, long rounds) {
  Exchange x{{new Side(), new Side()}, way, bytes, rounds};
  memset(x.side[0], 0, sizeof(Side));
  memset(x.side[1], 0, sizeof(Side));
  double us[2];
  std::thread a(run, std::cref(x), 0, &us[0]), b(run, std::cref(x), 1, &us[1]);
  a.join();
  b.join();
  delete x.side[0];
  delete x.side[1];
  return us[0] > us[1] ? us[0] : us[1];
}

}  // namespace

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? atol(argv[1]) : 200000;
  if (rounds <= 0) {
    fprintf(stderr, "usage: core_exchange [rounds]\n");
    return 2;
  }
  printf("# 2 threads on CPUs 0 and 1, %ld rounds; us per round\n", rounds);
  printf("%10s %8s %8s %8s\n", "bytes", "copy", "reduce", "lines");
  for (size_t bytes : {size_t(8), size_t(256), size_t(512), size_t(1024), size_t(2048)})
    printf("%10zu %8.3f %8.3f %8.3f\n", bytes, measure(Way::kCopy, bytes, rounds),
           measure(Way::kReduce, bytes, rounds), measure(Way::kLines, bytes, rounds));
  return 0;
}
