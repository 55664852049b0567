/* mpi_allreduce_perf: MPI_Allreduce timed like all_reduce_perf, with the same
 * size flags and the same table columns, so bench/compare scripts can put
 * gyre and an MPI library side by side.
 *   mpirun -np 2 mpi_allreduce_perf -b 8 -e 64M -f 2
 * Flags: -b -e -i -f -n -w as all_reduce_perf; -d float|double|int32|int64;
 * -c 0|1 (check, default 1); -a 0..3 (time across ranks as all_reduce_perf).
 * Only MPI_SUM: it is the operation both libraries are compared on. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct options {
  size_t minBytes, maxBytes, stepBytes, stepFactor;
  int iters, warmup, check, average;
  const char* typeName;
  MPI_Datatype type;
  size_t typeSize;
};

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
  if (*end) return 0;
  *out = (size_t)v;
  return 1;
}

static int parseType(const char* name, struct options* o) {
  if (!strcmp(name, "float") || !strcmp(name, "float32")) {
    o->typeName = "float"; o->type = MPI_FLOAT; o->typeSize = 4;
  } else if (!strcmp(name, "double") || !strcmp(name, "float64")) {
    o->typeName = "double"; o->type = MPI_DOUBLE; o->typeSize = 8;
  } else if (!strcmp(name, "int32") || !strcmp(name, "int")) {
    o->typeName = "int32"; o->type = MPI_INT32_T; o->typeSize = 4;
  } else if (!strcmp(name, "int64")) {
    o->typeName = "int64"; o->type = MPI_INT64_T; o->typeSize = 8;
  } else {
    return 0;
  }
  return 1;
}

static int parseArgs(int argc, char** argv, struct options* o) {
  int c;
  size_t v;
  while ((c = getopt(argc, argv, "b:e:i:f:n:w:d:c:a:")) != -1) {
    switch (c) {
      case 'b': if (!parseSize(optarg, &o->minBytes)) return 0; break;
      case 'e': if (!parseSize(optarg, &o->maxBytes)) return 0; break;
      case 'i': if (!parseSize(optarg, &o->stepBytes) || !o->stepBytes) return 0; break;
      case 'f': if (!parseSize(optarg, &v) || !v) return 0; o->stepFactor = v; break;
      case 'n': o->iters = atoi(optarg); if (o->iters < 1) return 0; break;
      case 'w': o->warmup = atoi(optarg); if (o->warmup < 0) return 0; break;
      case 'c': o->check = atoi(optarg); break;
      case 'a': o->average = atoi(optarg); if (o->average < 0 || o->average > 3) return 0; break;
      case 'd': if (!parseType(optarg, o)) return 0; break;
      default: return 0;
    }
  }
  return o->minBytes <= o->maxBytes;
}

/* Inputs are small integers, so the sum is exact in every type. */
static void fill(void* buf, size_t count, const struct options* o, int rank) {
  for (size_t i = 0; i < count; ++i) {
    int v = (int)(i % 7) + rank;
    if (o->type == MPI_FLOAT) ((float*)buf)[i] = (float)v;
    else if (o->type == MPI_DOUBLE) ((double*)buf)[i] = v;
    else if (o->type == MPI_INT32_T) ((int32_t*)buf)[i] = v;
    else ((int64_t*)buf)[i] = v;
  }
}

static long countWrong(const void* buf, size_t count, const struct options* o, int nranks) {
  long wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = (double)nranks * (double)(i % 7) + nranks * (nranks - 1) / 2.0, got;
    if (o->type == MPI_FLOAT) got = ((const float*)buf)[i];
    else if (o->type == MPI_DOUBLE) got = ((const double*)buf)[i];
    else if (o->type == MPI_INT32_T) got = ((const int32_t*)buf)[i];
    else got = (double)((const int64_t*)buf)[i];
    wrong += got != want;
  }
  return wrong;
}

/* Times one mode; returns this rank's us per call and sets *wrong (-1 = unchecked). */
static double timeMode(int inPlace, char* send, char* recv, size_t count,
                       const struct options* o, int rank, int nranks, long* wrong) {
  const void* src = inPlace ? MPI_IN_PLACE : send;
  fill(inPlace ? recv : send, count, o, rank);
  for (int i = 0; i < o->warmup; ++i) MPI_Allreduce(src, recv, (int)count, o->type, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < o->iters; ++i) MPI_Allreduce(src, recv, (int)count, o->type, MPI_SUM, MPI_COMM_WORLD);
  double us = (MPI_Wtime() - start) * 1e6 / o->iters;
  *wrong = -1;
  if (o->check) {
    memset(recv, 0xff, count * o->typeSize);
    fill(inPlace ? recv : send, count, o, rank);
    MPI_Allreduce(src, recv, (int)count, o->type, MPI_SUM, MPI_COMM_WORLD);
    *wrong = countWrong(recv, count, o, nranks);
  }
  return us;
}

/* Same combination of ranks' times as all_reduce_perf's -a. */
static double combine(double mine, int average, int nranks) {
  double out = mine;
  if (average == 0) MPI_Bcast(&out, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  else if (average == 2) MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  else if (average == 3) MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  else { MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); out /= nranks; }
  return out;
}

static void printMode(double us, double bytes, int nranks, long wrong, double* busSum) {
  double alg = us > 0 ? bytes / (us * 1e-6) / 1e9 : 0;
  double bus = alg * 2.0 * (nranks - 1) / nranks; /* the same busbw as gyre's table */
  char w[32];
  if (wrong < 0) snprintf(w, sizeof w, "N/A"); else snprintf(w, sizeof w, "%ld", wrong);
  char t[32]; /* same widths as gyre's table: 7 characters from 1 us to minutes */
  if (us < 1e4) snprintf(t, sizeof t, "%.2f", us);
  else if (us < 1e6) snprintf(t, sizeof t, "%.1f", us);
  else snprintf(t, sizeof t, "%.0f", us);
  printf("  %7s  %6.2f  %6.2f  %6s", t, alg, bus, w);
  *busSum += bus;
}

int main(int argc, char** argv) {
  struct options o = {32 << 20, 32 << 20, 1 << 20, 1, 20, 5, 1, 1, "float", MPI_FLOAT, 4};
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (!parseArgs(argc, argv, &o)) {
    if (rank == 0) fprintf(stderr, "usage: %s [-b min] [-e max] [-i step] [-f factor] [-n iters] [-w warmup] [-d float|double|int32|int64] [-c 0|1] [-a 0..3]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  size_t maxCount = o.maxBytes / o.typeSize;
  char* send = malloc(maxCount * o.typeSize + 64);
  char* recv = malloc(maxCount * o.typeSize + 64);
  memset(send, 0, maxCount * o.typeSize + 64);
  memset(recv, 0, maxCount * o.typeSize + 64);
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(version, &len);
    printf("# Collective test starting: mpi_allreduce_perf\n# %.*s\n", (int)strcspn(version, "\n"), version);
    printf("# nRanks %d minBytes %zu maxBytes %zu warmup iters: %d iters: %d validation: %d\n#\n",
           nranks, o.minBytes, o.maxBytes, o.warmup, o.iters, o.check);
    printf("# %10s  %12s  %8s  %6s  %6s  %-10s%-12s%11s  %-12s%-8s%13s\n", "", "", "", "", "", "",
           "out-of-place", "", "", "in-place", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)",
           "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  double busSum = 0;
  int rows = 0;
  long totalWrong = 0;
  size_t lastCount = (size_t)-1;
  for (size_t size = o.minBytes; size <= o.maxBytes;) {
    size_t count = size / o.typeSize;
    if (count != lastCount) {
      lastCount = count;
      long wrong[2], sum[2];
      double us[2];
      for (int ip = 0; ip < 2; ++ip)
        us[ip] = combine(timeMode(ip, send, recv, count, &o, rank, nranks, &wrong[ip]), o.average, nranks);
      MPI_Allreduce(wrong, sum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      if (rank == 0) {
        printf("%12zu  %12zu  %8s  %6s  %6d", count * o.typeSize, count, o.typeName, "sum", -1);
        for (int ip = 0; ip < 2; ++ip)
          printMode(us[ip], (double)(count * o.typeSize), nranks, o.check ? sum[ip] : -1, &busSum);
        printf("\n");
        fflush(stdout);
      }
      if (o.check) totalWrong += sum[0] + sum[1];
      rows += 2;
    }
    size_t next = o.stepFactor > 1 ? (size ? size * o.stepFactor : 1) : size + o.stepBytes;
    if (next <= size) break; /* overflow */
    size = next;
  }
  if (rank == 0) {
    if (o.check) printf("# Wrong elements       : %ld %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", rows ? busSum / rows : 0);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return totalWrong ? 1 : 0;
}
