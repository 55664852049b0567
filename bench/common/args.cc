#include "args.h"

#include <getopt.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "datatypes.h"

namespace gyre_bench {
namespace {

void usage(const ArgsSpec& spec, FILE* out) {
  std::fprintf(out,
      "usage: %s [options]\n"
      "  -b, --minbytes <size>      smallest message (default 32M); K/M/G suffixes\n"
      "  -e, --maxbytes <size>      largest message (default 32M)\n"
      "  -i, --stepbytes <size>     size increment when -f is 1 (default 1M)\n"
      "  -f, --stepfactor <n>       size multiplier (default 1: use -i)\n"
      "  -n, --iters <n>            timed iterations per size (default 20)\n"
      "  -w, --warmup_iters <n>     untimed iterations before each size (default 5)\n"
      "  -c, --check <0|1>          verify every result (default 1)\n"
      "  -d, --datatype <type>      %s (default float)\n",
      spec.program, typeNameList().c_str());
  // Accepted (and checked) by every binary, as nccl-tests does, so one flag
  // set serves a script running them all; ignored where the collective has none.
  std::fprintf(out, "  -o, --op <op>              %s (default sum)%s\n", opNameList().c_str(),
               spec.usesOp ? "" : "; ignored here");
  std::fprintf(out, "  -r, --root <rank>          root rank (default 0)%s\n", spec.usesRoot ? "" : "; ignored here");
  std::fprintf(out,
      "  -a, --average <0..3>       time across ranks: 0 rank 0, 1 mean, 2 min, 3 max "
      "(default 1)\n"
      "  -p, --procs <n>            fork n ranks on this host; without -p the ranks come\n"
      "                             from mpirun / srun / torchrun environment variables;\n"
      "                             1 or 2 forked ranks get a CPU each, as mpirun binds\n"
      "                             them (GYRE_BENCH_BIND=0: unbound)\n"
      "  -T, --timeout <seconds>    with -p: kill the ranks after this long (default 600,\n"
      "                             0 = never)\n"
      "  -G, --device <0|1>         1: device memory on GPU localRank %% count through\n"
      "                             ncclCommInitRank, CUDA-event timing (default 0: host;\n"
      "                             GYRE_BENCH_HOST_TIMER=1: the host clock instead)\n"
      "  -C, --cudagraph <n>        with -G 1: capture the timed iterations in a CUDA graph\n"
      "                             and launch it n times (as nccl-tests -G n; default 0)\n"
      "  -R, --local_register <0|1> host memory: 1 allocates the buffers with\n"
      "                             gyreMemAllocHost, which peers map for single-copy\n"
      "                             transfers (default 0: aligned_alloc)\n"
      "  -t, --nthreads 1 / -g, --ngpus 1   accepted for nccl-tests scripts; must be 1\n"
      "  -h, --help\n");
}

bool parseInt(const char* text, long lo, long hi, long* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

bool parseSize(const std::string& text, size_t* bytes) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno) return false;
  int shift = 0;
  switch (std::toupper(static_cast<unsigned char>(*end))) {
    case '\0': break;
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: return false;
  }
  if (*end && end[1]) return false;
  if (shift && v > (ULLONG_MAX >> shift)) return false;
  *bytes = static_cast<size_t>(v << shift);
  return true;
}

int parseArgs(int argc, char** argv, const ArgsSpec& spec, BenchArgs* args) {
  static const option kLong[] = {
      {"minbytes", required_argument, nullptr, 'b'},
      {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'},
      {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},
      {"warmup_iters", required_argument, nullptr, 'w'},
      {"check", required_argument, nullptr, 'c'},
      {"datatype", required_argument, nullptr, 'd'},
      {"op", required_argument, nullptr, 'o'},
      {"root", required_argument, nullptr, 'r'},
      {"average", required_argument, nullptr, 'a'},
      {"procs", required_argument, nullptr, 'p'},
      {"timeout", required_argument, nullptr, 'T'},
      {"nthreads", required_argument, nullptr, 't'},
      {"ngpus", required_argument, nullptr, 'g'},
      {"device", required_argument, nullptr, 'G'},
      {"cudagraph", required_argument, nullptr, 'C'},
      {"local_register", required_argument, nullptr, 'R'},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  long v = 0;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:c:d:o:r:a:p:T:t:g:G:C:R:h", kLong, nullptr)) != -1) {
    bool ok = true;
    switch (c) {
      case 'b': ok = parseSize(optarg, &args->minBytes); break;
      case 'e': ok = parseSize(optarg, &args->maxBytes); break;
      case 'i': ok = parseSize(optarg, &args->stepBytes) && args->stepBytes > 0; break;
      case 'f': ok = parseInt(optarg, 1, 1 << 20, &v); args->stepFactor = static_cast<size_t>(v); break;
      case 'n': ok = parseInt(optarg, 1, INT_MAX, &v); args->iters = static_cast<int>(v); break;
      case 'w': ok = parseInt(optarg, 0, INT_MAX, &v); args->warmupIters = static_cast<int>(v); break;
      case 'c': ok = parseInt(optarg, 0, 1, &v); args->check = v != 0; break;
      case 'd':
        ok = parseTypes(optarg, &args->types);
        args->allTypes = std::string(optarg) == "all";
        break;
      case 'o':
        ok = parseOps(optarg, &args->ops);
        args->allOps = std::string(optarg) == "all";
        break;
      case 'r': ok = parseInt(optarg, 0, INT_MAX, &v); args->root = static_cast<int>(v); break;
      case 'a': ok = parseInt(optarg, 0, 3, &v); args->average = static_cast<int>(v); break;
      case 'p': ok = parseInt(optarg, 1, 4096, &v); args->forkRanks = static_cast<int>(v); break;
      case 'T': ok = parseInt(optarg, 0, INT_MAX, &v); args->timeoutSeconds = static_cast<int>(v); break;
      case 'G': ok = parseInt(optarg, 0, 1, &v); args->device = v != 0; break;
      case 'R': ok = parseInt(optarg, 0, 1, &v); args->sharedAlloc = v != 0; break;
      case 'C': ok = parseInt(optarg, 0, 1 << 20, &v); args->graphLaunches = static_cast<int>(v); break;
      case 't':
      case 'g': ok = parseInt(optarg, 1, 1, &v); break;
      case 'h': usage(spec, stdout); return 0;
      default: usage(spec, stderr); return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "%s: invalid value '%s' for -%c\n", spec.program, optarg, c);
      usage(spec, stderr);
      return 2;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "%s: unexpected argument '%s'\n", spec.program, argv[optind]);
    return 2;
  }
  if (args->graphLaunches > 0 && !args->device) {
    std::fprintf(stderr, "%s: -C (CUDA graphs) needs device memory: add -G 1\n", spec.program);
    return 2;
  }
  if (args->minBytes > args->maxBytes) {
    std::fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", spec.program, args->minBytes,
                 args->maxBytes);
    return 2;
  }
  return -1;
}

std::vector<size_t> messageSizes(const BenchArgs& args) {
  std::vector<size_t> sizes;
  size_t size = args.minBytes;
  while (true) {
    sizes.push_back(size);
    size_t next;
    if (args.stepFactor > 1)
      next = size == 0 ? 1 : (size > args.maxBytes / args.stepFactor ? args.maxBytes + 1
                                                                     : size * args.stepFactor);
    else
      next = size > args.maxBytes - args.stepBytes ? args.maxBytes + 1 : size + args.stepBytes;
    if (next > args.maxBytes) break;
    size = next;
  }
  return sizes;
}

}  // namespace gyre_bench
