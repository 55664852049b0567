// core_round_trip: how far apart the first two CPUs are right now, as the
// time one cache line takes to go from CPU 0 to CPU 1 and back.
//
//   core_round_trip [batches]
//
// On a virtual machine the hypervisor may place the two vCPUs on cores that
// share a cache or on cores that do not, and may move them while a program
// runs; a cache-to-cache round trip then takes about 100 ns in one placement
// and about 500 ns in the other (2-vCPU AMD EPYC VM), and every small or
// medium shared-memory call between two ranks slows by the same factor.
// bench/compare/run calls this before and after each timed run to tell which
// placement the run met. Prints the median of `batches` batches in ns, or
// "n/a" with fewer than two CPUs.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { kRoundsPerBatch = 4000, kMaxBatches = 64 };

static _Alignas(64) atomic_long ball;
static long total_rounds;

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort
}

// CPU 1 answers every odd value with the next even one.
static void* answer(void* unused) {
  (void)unused;
  pin(1);
  for (long i = 0; i < total_rounds; ++i) {
    while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 1) {
    }
    atomic_store_explicit(&ball, 2 * i + 2, memory_order_release);
  }
  return NULL;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int batches = argc > 1 ? atoi(argv[1]) : 9;
  if (batches < 1 || batches > kMaxBatches) {
    fprintf(stderr, "usage: core_round_trip [batches 1..%d]\n", kMaxBatches);
    return 2;
  }
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    printf("n/a\n");
    return 0;
  }
  total_rounds = (long)batches * kRoundsPerBatch;
  pin(0);
  pthread_t other;
  if (pthread_create(&other, NULL, answer, NULL) != 0) {
    perror("core_round_trip: pthread_create");
    return 1;
  }
  double per_round[kMaxBatches];
  long i = 0;
  for (int b = 0; b < batches; ++b) {
    double start = now_ns();
    for (long end = i + kRoundsPerBatch; i < end; ++i) {
      atomic_store_explicit(&ball, 2 * i + 1, memory_order_release);
      while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 2) {
      }
    }
    per_round[b] = (now_ns() - start) / kRoundsPerBatch;
  }
  pthread_join(other, NULL);
  qsort(per_round, (size_t)batches, sizeof per_round[0], by_value);
  printf("%.0f\n", per_round[batches / 2]);
  return 0;
}
