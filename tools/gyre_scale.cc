// gyre-scale: how communicator init and a small AllReduce grow with the
// number of ranks on this host. Forks N ranks (host-memory communicators,
// ranks joined through ROOTS unique ids that the parent makes once they are
// forked: ncclGetUniqueId starts a thread, and no process may fork with live
// threads), and prints one line:
//   ranks N  init_ms <slowest rank's init>  allreduce_us <mean 8-byte AllReduce>  roots R
// The init time is each rank's gyreCommInitRankScalableHost (one root: the
// single-root rendezvous; several: each root gathers a block of ranks), from
// the moment every rank is forked (a shared start time), reduced with max
// over ranks; the latency is the mean over ITERS calls after 20 warm-up
// calls, max over ranks (ITERS = 0: init only, latency 0).
// tools/scale-model runs it for several N and fits a model to the numbers.
//
// usage: gyre-scale NRANKS [ITERS] [ROOTS]
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "gyre.h"

namespace {

double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

struct Shared {
  std::atomic<int> go;  // set by the parent once every rank is forked, the ids made and the clock started
  double start;
  ncclUniqueId ids[1024];
  double initMs[1024];
  double latencyUs[1024];
};

int runRank(Shared* s, int rank, int n, int roots, int iters) {
  while (s->go.load() == 0) usleep(100);  // fork time is not init time
  ncclComm_t comm = nullptr;
  if (gyreCommInitRankScalableHost(&comm, n, rank, roots, s->ids, nullptr) != ncclSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", rank, ncclGetLastError(nullptr));
    return 1;
  }
  s->initMs[rank] = (now() - s->start) * 1e3;
  if (iters == 0) return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  double v = 1, out = 0;
  for (int i = 0; i < 20; ++i) ncclAllReduce(&v, &out, 1, ncclFloat64, ncclSum, comm, nullptr);
  const double t0 = now();
  for (int i = 0; i < iters; ++i)
    if (ncclAllReduce(&v, &out, 1, ncclFloat64, ncclSum, comm, nullptr) != ncclSuccess) {
      fprintf(stderr, "rank %d: allreduce: %s\n", rank, ncclGetLastError(nullptr));
      return 1;
    }
  s->latencyUs[rank] = (now() - t0) / iters * 1e6;
  if (out != n) {
    fprintf(stderr, "rank %d: sum %g, want %d\n", rank, out, n);
    return 1;
  }
  ncclCommDestroy(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 0;
  const int iters = argc > 2 ? atoi(argv[2]) : 200;
  const int roots = argc > 3 ? atoi(argv[3]) : 1;
  if (n < 1 || n > 1024 || iters < 0 || roots < 1 || roots > n) {
    fprintf(stderr, "usage: gyre-scale NRANKS(1..1024) [ITERS(0: init only)] [ROOTS(1..NRANKS)]\n");
    return 2;
  }
  auto* s = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (s == MAP_FAILED) return 1;
  static pid_t pids[1024];
  for (int r = 0; r < n; ++r)
    if ((pids[r] = fork()) == 0) _exit(runRank(s, r, n, roots, iters));
  for (int i = 0; i < roots; ++i)
    if (ncclGetUniqueId(&s->ids[i]) != ncclSuccess) {
      fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
      for (int r = 0; r < n; ++r) kill(pids[r], SIGKILL);
      for (int r = 0; r < n; ++r) waitpid(pids[r], nullptr, 0);
      return 1;
    }
  s->start = now();
  s->go.store(1);
  int failed = 0;
  const double deadline = now() + 300;
  for (int done = 0; done < n;) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      ++done;
      failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    } else if (now() > deadline) {
      fprintf(stderr, "gyre-scale: ranks still running after 300 s\n");
      for (int r = 0; r < n; ++r) kill(pids[r], SIGKILL);
    } else {
      usleep(1000);
    }
  }
  if (failed) return 1;
  double initMax = 0, latMax = 0;
  for (int r = 0; r < n; ++r) {
    initMax = s->initMs[r] > initMax ? s->initMs[r] : initMax;
    latMax = s->latencyUs[r] > latMax ? s->latencyUs[r] : latMax;
  }
  printf("ranks %d  init_ms %.1f  allreduce_us %.1f  roots %d\n", n, initMax, latMax, roots);
  return 0;
}
