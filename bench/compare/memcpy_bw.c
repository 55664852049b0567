/* memcpy_bw: the host's copy bandwidth, the ceiling for collectives on host
 * memory (every byte a collective moves between processes on one host is at
 * least one memcpy through a shared buffer).
 *
 *   memcpy_bw [-t threads] [-n iters] size...      (sizes with K/M/G suffixes)
 *
 * Each thread copies its own buffer of `size` bytes `iters` times (after one
 * untimed copy that faults the pages in); the result is the bytes copied by
 * all threads together per second, in GB/s (1e9 B/s), as nccl-tests' algbw.
 * A copy reads and writes each byte, so the memory traffic is twice that. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct worker {
  pthread_t thread;
  char* src;
  char* dst;
  size_t bytes;
  int iters;
  pthread_barrier_t* start;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* copyLoop(void* arg) {
  struct worker* w = arg;
  memcpy(w->dst, w->src, w->bytes); /* fault in */
  pthread_barrier_wait(w->start);
  for (int i = 0; i < w->iters; ++i) {
    memcpy(w->dst, w->src, w->bytes);
    /* Keep the compiler from merging the copies. */
    __asm__ __volatile__("" : : "r"(w->dst) : "memory");
  }
  pthread_barrier_wait(w->start);
  return NULL;
}

static int parseSize(const char* s, size_t* out) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  switch (*end) {
    case 'K': case 'k': v <<= 10; ++end; break;
    case 'M': case 'm': v <<= 20; ++end; break;
    case 'G': case 'g': v <<= 30; ++end; break;
    default: break;
  }
  if (*end || v == 0) return 0;
  *out = (size_t)v;
  return 1;
}

/* Bytes copied per second by `threads` threads, each copying `bytes`. */
static double measure(int threads, size_t bytes, int iters) {
  struct worker* w = calloc((size_t)threads, sizeof *w);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  for (int t = 0; t < threads; ++t) {
    w[t].src = malloc(bytes);
    w[t].dst = malloc(bytes);
    if (!w[t].src || !w[t].dst) {
      fprintf(stderr, "memcpy_bw: cannot allocate 2 x %zu bytes\n", bytes);
      exit(1);
    }
    memset(w[t].src, t + 1, bytes);
    w[t].bytes = bytes;
    w[t].iters = iters;
    w[t].start = &start;
    pthread_create(&w[t].thread, NULL, copyLoop, &w[t]);
  }
  pthread_barrier_wait(&start);
  double t0 = now();
  pthread_barrier_wait(&start);
  double seconds = now() - t0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(w[t].thread, NULL);
    free(w[t].src);
    free(w[t].dst);
  }
  pthread_barrier_destroy(&start);
  free(w);
  return (double)bytes * iters * threads / seconds;
}

int main(int argc, char** argv) {
  int threads = 1, iters = 0, c;
  while ((c = getopt(argc, argv, "t:n:")) != -1) {
    if (c == 't') threads = atoi(optarg);
    else if (c == 'n') iters = atoi(optarg);
    else {
      fprintf(stderr, "usage: %s [-t threads] [-n iters] size...\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1 || optind == argc) {
    fprintf(stderr, "usage: %s [-t threads] [-n iters] size...\n", argv[0]);
    return 2;
  }
  printf("# %10s  %7s  %10s\n", "size(B)", "threads", "copy(GB/s)");
  for (int a = optind; a < argc; ++a) {
    size_t bytes;
    if (!parseSize(argv[a], &bytes)) {
      fprintf(stderr, "memcpy_bw: bad size '%s'\n", argv[a]);
      return 2;
    }
    /* About 2 GB copied per thread by default: a few hundred ms. */
    int n = iters > 0 ? iters : (int)(2e9 / (double)bytes) + 1;
    printf("%12zu  %7d  %10.2f\n", bytes, threads, measure(threads, bytes, n) / 1e9);
    fflush(stdout);
  }
  return 0;
}
