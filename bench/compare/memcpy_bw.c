/* memcpy_bw: the host's copy bandwidth, the ceiling for collectives on host
 * memory (every byte a collective moves between processes on one host is at
 * least one memcpy through a shared buffer).
 *
 *   memcpy_bw [-t threads] [-n iters] [-k] size...      (sizes with K/M/G suffixes)
 *
 * Each thread copies its own buffer of `size` bytes `iters` times (after one
 * untimed copy that faults the pages in); the result is the bytes copied by
 * all threads together per second, in GB/s (1e9 B/s), as nccl-tests' algbw.
 * A copy reads and writes each byte, so the memory traffic is twice that.
 *
 * -k copies with the kernel instead: process_vm_readv from a forked child's
 * pages of the source (cross-memory attach, what a single-copy collective
 * does with heap buffers), in pieces of at most 4 MiB. Where the kernel's
 * copy is slower than memcpy, reading a peer's heap buffer in place can
 * lose to two memcpys through a shared, cached buffer. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv */
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

struct worker {
  pthread_t thread;
  char* src;
  char* dst;
  size_t bytes;
  int iters;
  pthread_barrier_t* start;
  pid_t owner; /* -k: the child whose copy of src is read; 0: memcpy */
};

enum { kKernelPieceBytes = 4 << 20 };

/* One copy of the buffer: memcpy, or process_vm_readv from the owner. */
static void copyOnce(struct worker* w) {
  if (!w->owner) {
    memcpy(w->dst, w->src, w->bytes);
    return;
  }
  for (size_t off = 0; off < w->bytes; off += kKernelPieceBytes) {
    size_t n = w->bytes - off < kKernelPieceBytes ? w->bytes - off : kKernelPieceBytes;
    struct iovec local = {w->dst + off, n}, remote = {w->src + off, n};
    if (process_vm_readv(w->owner, &local, 1, &remote, 1, 0) != (ssize_t)n) {
      perror("memcpy_bw: process_vm_readv");
      exit(1);
    }
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* copyLoop(void* arg) {
  struct worker* w = arg;
  copyOnce(w); /* fault in */
  pthread_barrier_wait(w->start);
  for (int i = 0; i < w->iters; ++i) {
    copyOnce(w);
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
static double measure(int threads, size_t bytes, int iters, int kernel) {
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
    if (kernel) {
      /* The child shares the filled pages copy-on-write and never writes them. */
      w[t].owner = fork();
      if (w[t].owner < 0) {
        perror("memcpy_bw: fork");
        exit(1);
      }
      if (w[t].owner == 0) {
        pause();
        _exit(0);
      }
    }
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
    if (w[t].owner > 0) {
      kill(w[t].owner, SIGKILL);
      waitpid(w[t].owner, NULL, 0);
    }
    free(w[t].src);
    free(w[t].dst);
  }
  pthread_barrier_destroy(&start);
  free(w);
  return (double)bytes * iters * threads / seconds;
}

int main(int argc, char** argv) {
  int threads = 1, iters = 0, kernel = 0, c;
  while ((c = getopt(argc, argv, "t:n:k")) != -1) {
    if (c == 't') threads = atoi(optarg);
    else if (c == 'n') iters = atoi(optarg);
    else if (c == 'k') kernel = 1;
    else {
      fprintf(stderr, "usage: %s [-t threads] [-n iters] [-k] size...\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1 || optind == argc) {
    fprintf(stderr, "usage: %s [-t threads] [-n iters] [-k] size...\n", argv[0]);
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
    printf("%12zu  %7d  %10.2f\n", bytes, threads, measure(threads, bytes, n, kernel) / 1e9);
    fflush(stdout);
  }
  return 0;
}
