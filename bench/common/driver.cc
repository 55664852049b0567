// The loop shared by every *_perf binary: for each type, op and message size,
// time the collective out-of-place and in-place on host or device memory
// (memory.h), check the results, combine the ranks' numbers through the
// communicator, and let rank 0 print the row.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "args.h"
#include "check.h"
#include "collective.h"
#include "datatypes.h"
#include "launch.h"
#include "memory.h"
#include "report.h"
#include "stats.h"

namespace gyre_bench {
namespace {

// A buffer of the benchmark's memory kind, freed by it.
struct Buffer {
  BenchMemory* memory = nullptr;
  char* ptr = nullptr;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (ptr) memory->release(ptr);
  }
  bool allocate(BenchMemory* m, size_t bytes) {
    memory = m;
    ptr = static_cast<char*>(m->alloc(bytes));
    return ptr != nullptr;
  }
  char* get() const { return ptr; }
};

constexpr size_t kProbeElems = 16;

class RankRunner {
 public:
  RankRunner(const BenchArgs& args, const Collective& coll, const RankContext& ctx)
      : args_(args), coll_(coll), ctx_(ctx) {}

  int run() {
    if (coll_.usesRoot && args_.root >= ctx_.nranks) {
      if (ctx_.rank == 0)
        std::fprintf(stderr, "%s: root %d is not a rank (nranks %d)\n", coll_.program,
                     args_.root, ctx_.nranks);
      return 2;
    }
    std::string why;
    memory_ = makeBenchMemory(args_.device, args_.sharedAlloc, ctx_.localRank, &why);
    if (!memory_) {
      std::fprintf(stderr, "%s: rank %d: cannot use device memory: %s\n", coll_.program, ctx_.rank, why.c_str());
      return 1;
    }
    allReduce_ = [this](void* data, size_t count, ncclDataType_t type) {
      return hostAllReduce(*memory_, comm_, data, count, type);
    };
    if (!ok(memory_->initComm(&comm_, ctx_.nranks, ctx_.id, ctx_.rank),
            args_.device ? "ncclCommInitRank" : "gyreCommInitRankHost"))
      return 1;
    std::vector<RankIdentity> ids;
    if (!ok(gatherIdentities(allReduce_, ctx_.rank, ctx_.nranks, &ids), "gathering rank identities"))
      return abortComm();
    if (!allocateBuffers()) return abortComm();
    if (ctx_.rank == 0) {
      printRunHeader(coll_.program, args_, ctx_, ids);
      printColumnHeader();
    }
    for (ncclDataType_t type : args_.types)
      for (ncclRedOp_t op : coll_.usesOp ? args_.ops : std::vector<ncclRedOp_t>{ncclSum})
        if (!runSizes(type, op)) return abortComm();
    if (ctx_.rank == 0)
      printFooter(rows_ ? busBwSum_ / rows_ : 0, args_.check, totalWrong_);
    if (!ok(ncclCommDestroy(comm_), "ncclCommDestroy")) return 1;
    return totalWrong_ ? 1 : 0;
  }

 private:
  bool ok(ncclResult_t r, const char* what) {
    if (r == ncclSuccess) return true;
    std::fprintf(stderr, "%s: rank %d: %s failed: %s: %s\n", coll_.program, ctx_.rank, what,
                 ncclGetErrorString(r), ncclGetLastError(comm_));
    return false;
  }

  int abortComm() {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    return 1;
  }

  // Elements of the single buffer an in-place call works in.
  static size_t inPlaceElems(const CollCounts& c) {
    return std::max(c.inplaceSendOffset + c.sendCount, c.inplaceRecvOffset + c.recvCount);
  }

  // Bytes one buffer needs for a message of `count` elements.
  size_t bytesNeeded(size_t count, size_t typeBytes, bool inPlace) const {
    CollCounts c = coll_.counts(count, typeBytes, ctx_.nranks, ctx_.rank);
    return (inPlace ? inPlaceElems(c) : std::max(c.sendCount, c.recvCount)) * typeBytes;
  }

  bool allocateBuffers() {
    // At least room for probe(): kProbeElems per rank of the widest type.
    size_t oop = bytesNeeded(kProbeElems * ctx_.nranks, 8, false), inplace = 0;
    for (ncclDataType_t type : args_.types)
      for (size_t bytes : messageSizes(args_)) {
        size_t ts = typeSize(type);
        oop = std::max(oop, bytesNeeded(bytes / ts, ts, false));
        inplace = std::max(inplace, bytesNeeded(bytes / ts, ts, true));
      }
    size_t recvBytes = std::max(oop, inplace);
    scratch_.assign(recvBytes, 0);
    if (send_.allocate(memory_.get(), oop) && recv_.allocate(memory_.get(), recvBytes)) return true;
    std::fprintf(stderr, "%s: rank %d: cannot allocate %zu bytes of %s buffers\n",
                 coll_.program, ctx_.rank, oop + recvBytes, memory_->kind());
    return false;
  }

  // Returns false after a library error (already reported).
  bool runSizes(ncclDataType_t type, ncclRedOp_t op) {
    const size_t ts = typeSize(type);
    const char* opText = coll_.usesOp ? opName(op) : "none";
    const CheckPattern pattern(type, op, ctx_.nranks);
    if (args_.allTypes || args_.allOps) {
      bool supported = true;
      if (!probe(type, op, &supported)) return false;
      if (!supported) return true;
    }
    if (!ok(warmUp(type, op), coll_.name)) return false;
    size_t lastCount = SIZE_MAX;
    for (size_t bytes : messageSizes(args_)) {
      // nccl-tests rounds each size down to whole elements; sizes that round
      // to the same count as the previous row would only repeat it.
      size_t count = bytes / ts;
      if (count == lastCount) continue;
      lastCount = count;
      CollCounts c = coll_.counts(count, ts, ctx_.nranks, ctx_.rank);
      ModeResult modes[2];
      for (int inPlace = 0; inPlace < 2; ++inPlace)
        if (!ok(runMode(inPlace, c, type, op, pattern, &modes[inPlace]), coll_.name)) return false;
      if (!aggregate(c, ts, modes)) return false;
      if (ctx_.rank == 0)
        printRow(std::max(c.sendCount, c.recvCount) * ts, c.paramCount, type, opText,
                 coll_.usesRoot ? args_.root : -1, modes[0], modes[1]);
    }
    return true;
  }

  // Under -d all / -o all, finds out whether the library takes this type and
  // op with one call of at least one element per rank (a count of 0 may be
  // accepted before the type is looked at; AlltoAll rounds blocks down to 16
  // bytes, hence kProbeElems per rank). Argument checks are local and the
  // same on every rank, so all ranks skip an unsupported pair together.
  bool probe(ncclDataType_t type, ncclRedOp_t op, bool* supported) {
    CollCounts c = coll_.counts(kProbeElems * ctx_.nranks, typeSize(type), ctx_.nranks, ctx_.rank);
    ncclResult_t r = coll_.run(send_.get(), recv_.get(), c, type, op, args_.root, comm_, memory_->stream());
    if (r == ncclSuccess && !memory_->synchronize()) r = ncclUnhandledCudaError;
    *supported = r != ncclInvalidArgument;
    if (!*supported && ctx_.rank == 0)
      printSkipped(type, coll_.usesOp ? opName(op) : "none", ncclGetLastError(comm_));
    return *supported ? ok(r, coll_.name) : true;
  }

  // As nccl-tests: before the first row, warm-up calls at the largest and then
  // the smallest size. Without them the first row ran slow (4 ranks at 8 B:
  // 25 us against 13 us a row later), since the ranks had only just started.
  ncclResult_t warmUp(ncclDataType_t type, ncclRedOp_t op) {
    const std::vector<size_t> sizes = messageSizes(args_);
    if (sizes.empty()) return ncclSuccess;
    const size_t ts = typeSize(type);
    for (size_t bytes : {sizes.back(), sizes.front()}) {
      CollCounts c = coll_.counts(bytes / ts, ts, ctx_.nranks, ctx_.rank);
      for (int i = 0; i < args_.warmupIters; ++i) {
        ncclResult_t r = coll_.run(send_.get(), recv_.get(), c, type, op, args_.root, comm_, memory_->stream());
        if (r != ncclSuccess) return r;
      }
    }
    return memory_->synchronize() ? ncclSuccess : ncclUnhandledCudaError;
  }

  ncclResult_t runMode(bool inPlace, const CollCounts& c, ncclDataType_t type, ncclRedOp_t op,
                       const CheckPattern& pattern, ModeResult* out) {
    const size_t ts = typeSize(type);
    char* recv = recv_.get() + (inPlace ? c.inplaceRecvOffset * ts : 0);
    char* send = inPlace ? recv_.get() + c.inplaceSendOffset * ts : send_.get();
    auto call = [&] { return coll_.run(send, recv, c, type, op, args_.root, comm_, memory_->stream()); };
    if (args_.check && !fill(send, c.sendCount, ts, pattern)) return ncclUnhandledCudaError;
    ncclResult_t r = ncclSuccess;
    if (inPlace && !coll_.checkInPlace) {
      // NCCL has no in-place form of this collective; nccl-tests times it
      // anyway. Where the library refuses it (the same argument check on
      // every rank), the columns say N/A and the reason is printed once.
      if ((r = call()) == ncclSuccess && !memory_->synchronize()) r = ncclUnhandledCudaError;
      if (r == ncclInvalidArgument) {
        out->ran = false;
        if (ctx_.rank == 0 && !inPlaceRefusalShown_)
          printModeSkipped("in-place", coll_.name, ncclGetLastError(comm_));
        inPlaceRefusalShown_ = true;
        return ncclSuccess;
      }
    }
    for (int i = 0; i < args_.warmupIters && r == ncclSuccess; ++i) r = call();
    // The previous collective returned on every rank only once all had
    // joined it, so the ranks start this loop together.
    if (r == ncclSuccess && !memory_->synchronize()) r = ncclUnhandledCudaError;
    double us = 0;
    int calls = args_.iters;
    if (args_.graphLaunches > 0) {
      // Captured once, then launched: one launch untimed, the rest timed.
      if (r == ncclSuccess && !memory_->beginCapture()) r = ncclUnhandledCudaError;
      for (int i = 0; i < args_.iters && r == ncclSuccess; ++i) r = call();
      if (!memory_->endCapture() && r == ncclSuccess) r = ncclUnhandledCudaError;
      if (r == ncclSuccess && (!memory_->launchGraph() || !memory_->synchronize())) r = ncclUnhandledCudaError;
      if (r != ncclSuccess) return r;
      memory_->startTimer();
      for (int g = 0; g < args_.graphLaunches; ++g)
        if (!memory_->launchGraph()) return ncclUnhandledCudaError;
      us = memory_->stopTimerUs();
      calls = args_.iters * args_.graphLaunches;
    } else {
      memory_->startTimer();
      for (int i = 0; i < args_.iters && r == ncclSuccess; ++i) r = call();
      us = memory_->stopTimerUs();
      if (r != ncclSuccess) return r;
    }
    if (us < 0) return ncclUnhandledCudaError;
    out->timeUs = us / calls;
    if (!args_.check || (inPlace && !coll_.checkInPlace)) return ncclSuccess;
    // The timed loop left results (in-place: results of results) behind;
    // start again from known inputs and a receive buffer that cannot pass.
    size_t poisonBytes = (inPlace ? inPlaceElems(c) : c.recvCount) * ts;
    poison(scratch_.data(), poisonBytes);
    if (!memory_->upload(inPlace ? recv_.get() : recv, scratch_.data(), poisonBytes)) return ncclUnhandledCudaError;
    if (!fill(send, c.sendCount, ts, pattern)) return ncclUnhandledCudaError;
    if (args_.graphLaunches > 0 && args_.iters == 1) {
      // The graph holds this one call: check what a replay of it leaves.
      if (!memory_->launchGraph() || !memory_->synchronize()) return ncclUnhandledCudaError;
    } else if ((r = call()) != ncclSuccess) {
      return r;
    }
    size_t n = coll_.checkedCount(c, ctx_.rank, args_.root);
    if (!memory_->download(scratch_.data(), recv, n * ts)) return ncclUnhandledCudaError;
    out->wrong = static_cast<int64_t>(countWrong(scratch_.data(), n, pattern, [&](size_t i) {
      return coll_.expected(pattern, c, i, ctx_.rank, ctx_.nranks, args_.root);
    }));
    return ncclSuccess;
  }

  // This rank's check input, written through host scratch memory.
  bool fill(char* dst, size_t count, size_t ts, const CheckPattern& pattern) {
    fillInput(scratch_.data(), count, pattern, ctx_.rank, 0);
    return memory_->upload(dst, scratch_.data(), count * ts);
  }

  // Replaces this rank's numbers with the combined ones of all ranks.
  bool aggregate(const CollCounts& c, size_t ts, ModeResult modes[2]) {
    std::vector<RowTimes> all;
    if (!ok(gatherTimes(allReduce_, ctx_.rank, ctx_.nranks, {modes[0].timeUs, modes[1].timeUs}, &all),
            "gathering times"))
      return false;
    if (args_.check) {
      // A mode that is not checked stays -1 (N/A) on every rank alike.
      int64_t wrong[2] = {std::max<int64_t>(modes[0].wrong, 0),
                          std::max<int64_t>(modes[1].wrong, 0)};
      if (!ok(sumWrong(allReduce_, wrong), "summing wrong counts")) return false;
      for (int m = 0; m < 2; ++m)
        if (modes[m].wrong >= 0) {
          modes[m].wrong = wrong[m];
          totalWrong_ += wrong[m];
        }
    }
    const double bytes = static_cast<double>(std::max(c.sendCount, c.recvCount) * ts);
    for (int m = 0; m < 2; ++m) {
      std::vector<double> times;
      for (const RowTimes& t : all) times.push_back(m ? t.inPlaceUs : t.outOfPlaceUs);
      ModeResult& r = modes[m];
      if (!r.ran) continue;
      r.timeUs = combineTimes(times, args_.average);
      r.algBw = r.timeUs > 0 ? bytes / (r.timeUs * 1e-6) / 1e9 : 0;
      r.busBw = r.algBw * coll_.busBwFactor(ctx_.nranks);
      busBwSum_ += r.busBw;
      ++rows_;
    }
    return true;
  }

  const BenchArgs& args_;
  const Collective& coll_;
  const RankContext& ctx_;
  std::unique_ptr<BenchMemory> memory_;
  HostAllReduceFn allReduce_;
  ncclComm_t comm_ = nullptr;
  Buffer send_, recv_;
  std::vector<char> scratch_;  // host copy of inputs and results for the check
  double busBwSum_ = 0;
  int rows_ = 0;
  int64_t totalWrong_ = 0;
  bool inPlaceRefusalShown_ = false;
};

}  // namespace

int benchMain(int argc, char** argv, const Collective& coll) {
  BenchArgs args;
  int rc = parseArgs(argc, argv, {coll.program, coll.usesOp, coll.usesRoot}, &args);
  if (rc >= 0) return rc;
  LaunchOptions launch;
  launch.forkRanks = args.forkRanks;
  launch.timeoutSeconds = args.timeoutSeconds;
  return launchRanks(launch, [&](const RankContext& ctx) {
    return RankRunner(args, coll, ctx).run();
  });
}

}  // namespace gyre_bench
