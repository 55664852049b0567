// path_costs: what each way of moving a peer's bytes costs on this machine,
// the facts behind the host planner's single-copy thresholds
// (src/plan/host_thresholds.h, docs/CALIBRATION.md). Two processes, pinned
// to the first two CPUs: an owner whose buffer was just written (its lines
// still in the owner's caches, as a collective's input usually is) and a
// reader that takes it.
//
//   path_costs [-n min_iters] [-s slot_bytes] [size...]   (K/M suffixes; default 128K..64M x2, 512K slots)
//
// Columns, GB/s (1e9 B/s) of the reader's copy, median over the iterations:
//   memcpy      the reader's own warm buffers (the ceiling of any copy)
//   memcpy-nt   the same with non-temporal (streaming) stores: the library's
//               own, through gyreMemcpyStreaming
//   first-touch memcpy into freshly mapped pages: the page faults a never
//               reused destination pays
//   mapped      memcpy from the owner's shared mapping (single copy of a
//               gyreMemAllocHost buffer: cache-to-cache, then memory)
//   vm_readv    process_vm_readv of the owner's private heap buffer (single
//               copy by reference: CMA, what Open MPI's vader and MPICH read with)
//   fifo        the owner copies into a shared FIFO of 8 slots, the reader
//               copies out as slots fill (gyre's two-copy path by value),
//               end to end
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gyre.h"

namespace {

constexpr int kSlots = 8;
constexpr double kWaitSeconds = 20;  // a peer silent this long has died: exit, never hang

enum Method { kMapped, kVmReadv, kFifo, kQuit };

struct alignas(64) Control {
  std::atomic<uint64_t> cmdSeq{0};
  std::atomic<int> method{0};
  std::atomic<size_t> bytes{0};
  std::atomic<size_t> slotBytes{0};
  std::atomic<uint64_t> ready{0};   // owner: its buffer is written for cmdSeq
  std::atomic<uint64_t> done{0};    // reader: finished cmdSeq
  std::atomic<uintptr_t> privateSrc{0};
  alignas(64) std::atomic<uint64_t> filled{0};    // FIFO: chunks the owner has written
  alignas(64) std::atomic<uint64_t> drained{0};   // FIFO: chunks the reader has taken
};

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)), &set);
  sched_setaffinity(0, sizeof(set), &set);
}

// Spins until pred() holds; exits the process past kWaitSeconds.
template <typename Pred>
void waitFor(Pred pred, const char* what) {
  double start = 0;
  for (uint64_t spins = 0; !pred(); ++spins) {
    if ((spins & 0xfff) != 0xfff) continue;
    if (start == 0) start = now();
    else if (now() - start > kWaitSeconds) {
      fprintf(stderr, "path_costs: no progress for %.0f s waiting for %s\n", kWaitSeconds, what);
      _exit(1);
    }
    sched_yield();
  }
}

void* mapBytes(size_t n, bool shared) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("path_costs: mmap");
    exit(1);
  }
  return p;
}

// The owner: writes the buffer a command names, then serves it.
void ownerLoop(Control* c, char* shared, char* fifo) {
  pin(1);
  size_t maxBytes = c->bytes.load();
  char* priv = static_cast<char*>(mapBytes(maxBytes, false));
  memset(priv, 1, maxBytes);
  c->privateSrc.store(reinterpret_cast<uintptr_t>(priv));
  uint64_t seen = 0;
  for (;;) {
    waitFor([&] { return c->cmdSeq.load(std::memory_order_acquire) != seen; }, "the reader's next command");
    seen = c->cmdSeq.load(std::memory_order_acquire);
    int m = c->method.load();
    if (m == kQuit) return;
    size_t n = c->bytes.load();
    char* src = m == kMapped ? shared : priv;
    memset(src, static_cast<int>(seen & 0x7f), n);  // just written: in this core's caches
    c->ready.store(seen, std::memory_order_release);
    if (m == kFifo) {
      size_t slot = c->slotBytes.load();
      uint64_t chunks = (n + slot - 1) / slot;
      for (uint64_t k = 0; k < chunks; ++k) {
        waitFor([&] { return c->filled.load(std::memory_order_relaxed) - c->drained.load(std::memory_order_acquire) < kSlots; },
                "a free FIFO slot");
        size_t len = std::min(slot, n - k * slot);
        memcpy(fifo + (k % kSlots) * slot, src + k * slot, len);
        c->filled.fetch_add(1, std::memory_order_release);
      }
    }
    waitFor([&] { return c->done.load(std::memory_order_acquire) == seen; }, "the reader to finish");
  }
}

struct Reader {
  Control* c;
  char* shared;
  char* fifo;
  char* dst;
  char* own;
  pid_t owner;
  uint64_t seq = 0;

  // One timed transfer of `n` bytes by `m`; seconds.
  double cross(int m, size_t n, size_t slot) {
    c->method.store(m);
    c->bytes.store(n);
    c->slotBytes.store(slot);
    c->filled.store(0);
    c->drained.store(0);
    c->cmdSeq.store(++seq, std::memory_order_release);
    waitFor([&] { return c->ready.load(std::memory_order_acquire) == seq; }, "the owner's buffer");
    double t0 = now();
    if (m == kMapped) {
      memcpy(dst, shared, n);
    } else if (m == kVmReadv) {
      iovec local = {dst, n}, remote = {reinterpret_cast<void*>(c->privateSrc.load()), n};
      if (process_vm_readv(owner, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n)) {
        perror("path_costs: process_vm_readv");
        _exit(1);
      }
    } else {
      uint64_t chunks = (n + slot - 1) / slot;
      for (uint64_t k = 0; k < chunks; ++k) {
        waitFor([&] { return c->filled.load(std::memory_order_acquire) > k; }, "a filled FIFO slot");
        size_t len = std::min(slot, n - k * slot);
        memcpy(dst + k * slot, fifo + (k % kSlots) * slot, len);
        c->drained.fetch_add(1, std::memory_order_release);
      }
    }
    double t = now() - t0;
    c->done.store(seq, std::memory_order_release);
    return t;
  }
};

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1 << 10; break;
    case 'M': case 'm': v *= 1 << 20; break;
    case 'G': case 'g': v *= 1 << 30; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

std::string sizeLabel(size_t b) {
  return b >= (1 << 20) ? std::to_string(b >> 20) + " MiB" : std::to_string(b >> 10) + " KiB";
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "?";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int minIters = 5;
  size_t slot = 512 << 10;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) minIters = std::max(1, atoi(argv[++i]));
    else if (!strcmp(argv[i], "-s") && i + 1 < argc) slot = parseSize(argv[++i]);
    else if (argv[i][0] >= '0' && argv[i][0] <= '9') sizes.push_back(parseSize(argv[i]));
    else {
      fprintf(stderr, "usage: path_costs [-n min_iters] [-s slot_bytes] [size...]\n");
      return 2;
    }
  }
  if (sizes.empty())
    for (size_t b = 128 << 10; b <= (64u << 20); b *= 2) sizes.push_back(b);
  if (slot == 0) slot = 512 << 10;
  size_t maxBytes = *std::max_element(sizes.begin(), sizes.end());

  auto* c = new (mapBytes(sizeof(Control), true)) Control;
  char* shared = static_cast<char*>(mapBytes(maxBytes, true));
  char* fifo = static_cast<char*>(mapBytes(kSlots * slot, true));
  memset(shared, 0, maxBytes);
  memset(fifo, 0, kSlots * slot);
  c->bytes.store(maxBytes);
  pid_t owner = fork();  // no threads exist yet
  if (owner < 0) {
    perror("path_costs: fork");
    return 1;
  }
  if (owner == 0) {
    ownerLoop(c, shared, fifo);
    _exit(0);
  }
  pin(0);
  waitFor([&] { return c->privateSrc.load() != 0; }, "the owner to start");
  Reader r{c, shared, fifo, static_cast<char*>(mapBytes(maxBytes, false)),
           static_cast<char*>(mapBytes(maxBytes, false)), owner};
  memset(r.dst, 0, maxBytes);
  memset(r.own, 2, maxBytes);

  printf("# path_costs on %s, %ld CPUs online; owner on CPU 1, reader on CPU 0; FIFO %d x %s slots\n",
         cpuModel().c_str(), sysconf(_SC_NPROCESSORS_ONLN), kSlots, sizeLabel(slot).c_str());
  printf("# GB/s of the reader's copy, median of >= %d iterations (at least 64 MiB moved per size and column)\n",
         minIters);
  printf("| size | memcpy | memcpy-nt | first-touch | mapped | vm_readv | fifo |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (size_t n : sizes) {
    int iters = static_cast<int>(std::max<size_t>(minIters, (size_t{64} << 20) / n));
    std::vector<double> t[6];
    for (int i = 0; i < iters; ++i) {  // interleaved, so every column sees the same machine
      double t0 = now();
      memcpy(r.dst, r.own, n);
      t[0].push_back(now() - t0);
      t0 = now();
      gyreMemcpyStreaming(r.dst, r.own, n);
      t[1].push_back(now() - t0);
      char* fresh = static_cast<char*>(mapBytes(n, false));
      t0 = now();
      memcpy(fresh, r.own, n);
      t[2].push_back(now() - t0);
      munmap(fresh, n);
      t[3].push_back(r.cross(kMapped, n, slot));
      t[4].push_back(r.cross(kVmReadv, n, slot));
      t[5].push_back(r.cross(kFifo, n, slot));
    }
    printf("| %s |", sizeLabel(n).c_str());
    for (auto& col : t) printf(" %.2f |", n / median(col) / 1e9);
    printf("\n");
    fflush(stdout);
  }
  c->method.store(kQuit);
  c->cmdSeq.store(++r.seq, std::memory_order_release);
  int status = 0;
  waitpid(owner, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
