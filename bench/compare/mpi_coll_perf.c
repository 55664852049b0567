/* mpi_coll_perf: MPI collectives timed like gyre's *_perf binaries, with the
 * same size flags, the same size semantics and the same table columns, so
 * bench/compare/run can put gyre and an MPI library side by side.
 *
 *   mpirun -np 2 mpi_coll_perf -C allreduce -b 8 -e 64M -f 4
 *
 * -C allreduce      MPI_Allreduce                busbw factor 2(n-1)/n
 *    allgather      MPI_Allgather                (n-1)/n, size = whole output
 *    broadcast      MPI_Bcast                    1
 *    reduce_scatter MPI_Reduce_scatter_block     (n-1)/n, size = whole input
 *    reduce         MPI_Reduce                   1
 *    alltoall       MPI_Alltoall                 (n-1)/n, size = whole buffer
 * Other flags as the *_perf binaries: -b -e -i -f -n -w -c -a -r, -d
 * float|double|int32|int64, -o sum|max|min. -m one runs only the mode
 * bench/compare/run reports (out-of-place, in-place for MPI_Bcast); the
 * other columns are then N/A. Default -m both.
 *
 * In-place runs use MPI_IN_PLACE. MPI_Bcast has only the one-buffer form, so
 * broadcast's out-of-place columns are N/A. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum coll { ALLREDUCE, ALLGATHER, BROADCAST, REDUCE_SCATTER, REDUCE, ALLTOALL };
static const char* const kCollNames[] = {"allreduce", "allgather",     "broadcast",
                                         "reduce_scatter", "reduce", "alltoall"};

struct options {
  enum coll coll;
  size_t minBytes, maxBytes, stepBytes, stepFactor;
  int iters, warmup, check, average, root;
  int oneMode; /* -m one */
  const char* typeName;
  MPI_Datatype type;
  size_t typeSize;
  const char* opName;
  MPI_Op op;
};

/* Element counts of one row, as nccl-tests derives them from the size. */
struct counts {
  size_t send, recv, param;
};

static struct counts countsFor(const struct options* o, size_t count, int nranks) {
  struct counts c;
  switch (o->coll) {
    case ALLGATHER: c.param = c.send = count / nranks; c.recv = c.send * nranks; break;
    case REDUCE_SCATTER: c.param = c.recv = count / nranks; c.send = c.recv * nranks; break;
    case ALLTOALL: {
      size_t align = o->typeSize < 16 ? 16 / o->typeSize : 1;
      c.param = count / nranks / align * align;
      c.send = c.recv = c.param * nranks;
      break;
    }
    default: c.send = c.recv = c.param = count; break;
  }
  return c;
}

static double busFactor(enum coll coll, int nranks) {
  switch (coll) {
    case ALLREDUCE: return 2.0 * (nranks - 1) / nranks;
    case BROADCAST: case REDUCE: return 1.0;
    default: return (double)(nranks - 1) / nranks;
  }
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

static int parseOp(const char* name, struct options* o) {
  if (!strcmp(name, "sum")) o->op = MPI_SUM;
  else if (!strcmp(name, "max")) o->op = MPI_MAX;
  else if (!strcmp(name, "min")) o->op = MPI_MIN;
  else return 0;
  o->opName = !strcmp(name, "sum") ? "sum" : !strcmp(name, "max") ? "max" : "min";
  return 1;
}

static int parseColl(const char* name, struct options* o) {
  for (int i = 0; i < (int)(sizeof kCollNames / sizeof *kCollNames); ++i)
    if (!strcmp(name, kCollNames[i])) { o->coll = (enum coll)i; return 1; }
  return 0;
}

static int parseArgs(int argc, char** argv, struct options* o) {
  int c;
  size_t v;
  while ((c = getopt(argc, argv, "C:b:e:i:f:n:w:d:o:c:a:r:m:")) != -1) {
    switch (c) {
      case 'm':
        if (strcmp(optarg, "one") && strcmp(optarg, "both")) return 0;
        o->oneMode = !strcmp(optarg, "one");
        break;
      case 'C': if (!parseColl(optarg, o)) return 0; break;
      case 'b': if (!parseSize(optarg, &o->minBytes)) return 0; break;
      case 'e': if (!parseSize(optarg, &o->maxBytes)) return 0; break;
      case 'i': if (!parseSize(optarg, &o->stepBytes) || !o->stepBytes) return 0; break;
      case 'f': if (!parseSize(optarg, &v) || !v) return 0; o->stepFactor = v; break;
      case 'n': o->iters = atoi(optarg); if (o->iters < 1) return 0; break;
      case 'w': o->warmup = atoi(optarg); if (o->warmup < 0) return 0; break;
      case 'c': o->check = atoi(optarg); break;
      case 'a': o->average = atoi(optarg); if (o->average < 0 || o->average > 3) return 0; break;
      case 'r': o->root = atoi(optarg); if (o->root < 0) return 0; break;
      case 'd': if (!parseType(optarg, o)) return 0; break;
      case 'o': if (!parseOp(optarg, o)) return 0; break;
      default: return 0;
    }
  }
  return optind == argc && o->minBytes <= o->maxBytes;
}

/* Small non-negative integers, distinct per rank and element: every sum,
 * max and min of up to a few hundred ranks is exact in every type. Period 50
 * in i, so the reduction is one table (checks of 256 MiB stay quick). */
#define PERIOD 50
static int64_t input(int rank, size_t i) { return (int64_t)((i * 7 + (size_t)rank * 13 + 1) % PERIOD); }

static int64_t reducedTable[PERIOD];

static void makeReducedTable(const struct options* o, int nranks) {
  for (size_t i = 0; i < PERIOD; ++i) {
    int64_t acc = input(0, i);
    for (int r = 1; r < nranks; ++r) {
      int64_t v = input(r, i);
      if (o->op == MPI_SUM) acc += v;
      else if (o->op == MPI_MAX) acc = v > acc ? v : acc;
      else acc = v < acc ? v : acc;
    }
    reducedTable[i] = acc;
  }
}

static int64_t reduced(size_t i) { return reducedTable[i % PERIOD]; }

static void store(void* buf, size_t i, const struct options* o, int64_t v) {
  if (o->type == MPI_FLOAT) ((float*)buf)[i] = (float)v;
  else if (o->type == MPI_DOUBLE) ((double*)buf)[i] = (double)v;
  else if (o->type == MPI_INT32_T) ((int32_t*)buf)[i] = (int32_t)v;
  else ((int64_t*)buf)[i] = v;
}

static int64_t load(const void* buf, size_t i, const struct options* o) {
  if (o->type == MPI_FLOAT) return (int64_t)((const float*)buf)[i];
  if (o->type == MPI_DOUBLE) return (int64_t)((const double*)buf)[i];
  if (o->type == MPI_INT32_T) return ((const int32_t*)buf)[i];
  return ((const int64_t*)buf)[i];
}

/* Value this rank must find at receive element i (as gyre's bench/common). */
static int64_t expected(const struct options* o, const struct counts* c, size_t i, int rank,
                        int nranks) {
  switch (o->coll) {
    case ALLREDUCE: case REDUCE: return reduced(i);
    case ALLGATHER: return input((int)(i / c->send), i % c->send);
    case BROADCAST: return input(o->root, i);
    case REDUCE_SCATTER: return reduced((size_t)rank * c->recv + i);
    case ALLTOALL: return input((int)(i / c->param), (size_t)rank * c->param + i % c->param);
  }
  return 0;
}

/* Where this rank's input and output live in one mode. In place, MPI takes
 * the input from the receive buffer: Allgather at this rank's block,
 * Reduce_scatter_block and Alltoall in the whole buffer (the result of
 * Reduce_scatter_block then lands at its start). */
struct layout {
  char* input;       /* filled with this rank's input */
  const void* src;   /* send argument (MPI_IN_PLACE in place) */
  char* output;      /* where the result is checked */
};

static struct layout layoutFor(const struct options* o, const struct counts* c, int inPlace,
                               char* send, char* recv, int rank) {
  struct layout l = {send, send, recv};
  if (!inPlace) return l;
  l.src = MPI_IN_PLACE;
  l.input = recv;
  if (o->coll == ALLGATHER) l.input = recv + (size_t)rank * c->send * o->typeSize;
  /* MPI_Reduce takes MPI_IN_PLACE only at the root. */
  if (o->coll == REDUCE && rank != o->root) l.src = l.input = send;
  return l;
}

static void call(const struct options* o, const struct counts* c, const struct layout* l,
                 char* recv) {
  int n = (int)c->param;
  switch (o->coll) {
    case ALLREDUCE: MPI_Allreduce(l->src, recv, n, o->type, o->op, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(l->src, n, o->type, recv, n, o->type, MPI_COMM_WORLD); break;
    case BROADCAST: MPI_Bcast(recv, n, o->type, o->root, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER:
      MPI_Reduce_scatter_block(l->src, recv, n, o->type, o->op, MPI_COMM_WORLD);
      break;
    case REDUCE: MPI_Reduce(l->src, recv, n, o->type, o->op, o->root, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(l->src, n, o->type, recv, n, o->type, MPI_COMM_WORLD); break;
  }
}

static void fillInput(const struct options* o, const struct layout* l, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) store(l->input, i, o, input(rank, i));
}

/* Times one mode; returns this rank's us per call and sets *wrong (-1 = unchecked). */
static double timeMode(const struct options* o, const struct counts* c, int inPlace, char* send,
                       char* recv, int rank, int nranks, long* wrong) {
  /* Broadcast's input is the one buffer in both forms. */
  struct layout l = layoutFor(o, c, inPlace || o->coll == BROADCAST, send, recv, rank);
  fillInput(o, &l, c->send, rank);
  for (int i = 0; i < o->warmup; ++i) call(o, c, &l, recv);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < o->iters; ++i) call(o, c, &l, recv);
  double us = (MPI_Wtime() - start) * 1e6 / o->iters;
  *wrong = -1;
  if (o->check) {
    memset(recv, 0xff, (c->send > c->recv ? c->send : c->recv) * o->typeSize);
    fillInput(o, &l, c->send, rank);
    call(o, c, &l, recv);
    *wrong = 0;
    size_t n = (o->coll == REDUCE && rank != o->root) ? 0 : c->recv;
    for (size_t i = 0; i < n; ++i)
      *wrong += load(recv, i, o) != expected(o, c, i, rank, nranks);
  }
  return us;
}

/* Same combination of ranks' times as the *_perf binaries' -a. */
static double combine(double mine, int average, int nranks) {
  double out = mine;
  if (average == 0) MPI_Bcast(&out, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  else if (average == 2) MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  else if (average == 3) MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  else { MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); out /= nranks; }
  return out;
}

static void printMode(int measured, double us, double bytes, double factor, long wrong,
                      double* busSum, int* rows) {
  if (!measured) {
    printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  double alg = us > 0 ? bytes / (us * 1e-6) / 1e9 : 0;
  double bus = alg * factor;
  char w[32], t[32];
  if (wrong < 0) snprintf(w, sizeof w, "N/A"); else snprintf(w, sizeof w, "%ld", wrong);
  if (us >= 10000.0) snprintf(t, sizeof t, "%.0f", us);  /* nccl-tests' precision steps */
  else if (us >= 100.0) snprintf(t, sizeof t, "%.1f", us);
  else snprintf(t, sizeof t, "%.2f", us);
  printf("  %7s  %6.2f  %6.2f  %6s", t, alg, bus, w);
  *busSum += bus;
  ++*rows;
}

/* Whether a row times mode `inPlace`: MPI_Bcast has no out-of-place form,
 * and -m one keeps only the first form the call has. */
static int measuredMode(const struct options* o, int inPlace) {
  if (!inPlace && o->coll == BROADCAST) return 0;
  if (inPlace && o->oneMode && o->coll != BROADCAST) return 0;
  return 1;
}

static void printHeader(const struct options* o, int nranks) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len;
  MPI_Get_library_version(version, &len);
  printf("# Collective test starting: mpi_coll_perf -C %s\n# %.*s\n", kCollNames[o->coll],
         (int)strcspn(version, "\n"), version);
  printf("# nRanks %d minBytes %zu maxBytes %zu warmup iters: %d iters: %d validation: %d\n#\n",
         nranks, o->minBytes, o->maxBytes, o->warmup, o->iters, o->check);
  printf("# %10s  %12s  %8s  %6s  %6s  %-10s%-12s%11s  %-12s%-8s%13s\n", "", "", "", "", "", "",
         "out-of-place", "", "", "in-place", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count",
         "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
         "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

int main(int argc, char** argv) {
  struct options o = {ALLREDUCE, 32 << 20, 32 << 20, 1 << 20, 1, 20, 5, 1, 1, 0, 0,
                      "float", MPI_FLOAT, 4, "sum", MPI_SUM};
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (!parseArgs(argc, argv, &o) || o.root >= nranks) {
    if (rank == 0)
      fprintf(stderr, "usage: %s [-C allreduce|allgather|broadcast|reduce_scatter|reduce|alltoall] "
              "[-b min] [-e max] [-i step] [-f factor] [-n iters] [-w warmup] "
              "[-d float|double|int32|int64] [-o sum|max|min] [-r root] [-c 0|1] [-a 0..3] "
              "[-m both|one]\n",
              argv[0]);
    MPI_Finalize();
    return 2;
  }
  const int usesOp = o.coll == ALLREDUCE || o.coll == REDUCE || o.coll == REDUCE_SCATTER;
  const int usesRoot = o.coll == BROADCAST || o.coll == REDUCE;
  /* Buffers once, touched, with plain malloc: that is what GLIBC_TUNABLES
   * (bench/compare/run) acts on, also for Open MPI's own temporaries. */
  struct counts most = countsFor(&o, o.maxBytes / o.typeSize, nranks);
  size_t bytes = (most.send > most.recv ? most.send : most.recv) * o.typeSize + 64;
  char* send = malloc(bytes);
  char* recv = malloc(bytes);
  if (!send || !recv) {
    fprintf(stderr, "mpi_coll_perf: rank %d: cannot allocate 2 x %zu bytes\n", rank, bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(send, 0, bytes);
  memset(recv, 0, bytes);
  makeReducedTable(&o, nranks);
  if (rank == 0) printHeader(&o, nranks);
  double busSum = 0;
  int rows = 0;
  long totalWrong = 0;
  size_t lastCount = (size_t)-1;
  for (size_t size = o.minBytes; size <= o.maxBytes;) {
    size_t count = size / o.typeSize;
    if (count != lastCount) {
      lastCount = count;
      struct counts c = countsFor(&o, count, nranks);
      long wrong[2], sum[2];
      double us[2];
      for (int ip = 0; ip < 2; ++ip) {
        wrong[ip] = -1;
        us[ip] = 0;
        if (!measuredMode(&o, ip)) continue;
        us[ip] = combine(timeMode(&o, &c, ip, send, recv, rank, nranks, &wrong[ip]), o.average,
                         nranks);
      }
      MPI_Allreduce(wrong, sum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      if (rank == 0) {
        printf("%12zu  %12zu  %8s  %6s  %6d", (c.send > c.recv ? c.send : c.recv) * o.typeSize,
               c.param, o.typeName, usesOp ? o.opName : "none", usesRoot ? o.root : -1);
        double rowBytes = (double)((c.send > c.recv ? c.send : c.recv) * o.typeSize);
        for (int ip = 0; ip < 2; ++ip) {
          int measured = measuredMode(&o, ip);
          long w = (o.check && measured) ? sum[ip] : -1;
          printMode(measured, us[ip], rowBytes, busFactor(o.coll, nranks), w, &busSum, &rows);
        }
        printf("\n");
        fflush(stdout);
      }
      for (int ip = 0; ip < 2; ++ip)
        if (o.check && wrong[ip] >= 0) totalWrong += sum[ip];
    }
    size_t next = o.stepFactor > 1 ? (size ? size * o.stepFactor : 1) : size + o.stepBytes;
    if (next <= size) break; /* overflow */
    size = next;
  }
  if (rank == 0) {
    if (o.check)
      printf("# Wrong elements       : %ld %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", rows ? busSum / rows : 0);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return totalWrong ? 1 : 0;
}
