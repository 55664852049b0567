// The planner's choices, made once per communicator at init: for every
// collective and every power-of-two message size, the algorithm the cost
// model (cost_model.h) predicts fastest among those NCCL_ALGO allows and this
// build can run. A collective then costs one table lookup, not a model
// evaluation. NCCL_DEBUG_SUBSYS=TUNING prints the model's table and the
// resulting size ranges.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "src/call/coll_kind.h"
#include "src/plan/algorithm.h"
#include "src/plan/cost_model.h"
#include "src/plan/host_thresholds.h"
#include "src/plan/ring_order.h"

namespace gyre {

constexpr int kTunedColls = 5;       // AllReduce .. ReduceScatter (CollKind order)
constexpr int kTuningBuckets = 48;   // message sizes 2^0 .. 2^47 bytes

struct TuningTable {
  CostInputs inputs;  // bytes unset: shared by every entry
  Algorithm pick[kTunedColls][kTuningBuckets] = {};
  Protocol proto[kTunedColls][kTuningBuckets] = {};
  bool algorithmForced = false;  // NCCL_ALGO restricts the choice (the planner then adds no variants)
  bool directOnly = false;       // NCCL_ALGO allows Direct alone
  bool llAvailable = false;
  bool simpleExcluded = false;   // NCCL_PROTO leaves Simple out (LL only)
  // What NCCL_ALGO / NCCL_PROTO allow among what this communicator runs (a
  // tuner plugin chooses within them).
  std::vector<Algorithm> allowedAlgos;  // empty: all
  std::vector<Protocol> allowedProtos;
  // The host planner's size thresholds for this machine (set at init; the
  // defaults are the measured constants of calibration.h).
  HostThresholds host;
};

// `nranks` ranks planned on `rings`. LL is a choice only for `llAvailable`
// (device communicators that run kernels); NCCL_PROTO restricts it.
void buildTuningTable(const RingPlan& rings, int nranks, bool hostMemory, bool llAvailable, TuningTable* out);

// `bytes` as nccl-tests counts them: AllGather's gathered output,
// ReduceScatter's input, else one rank's buffer. Sizes between powers of two
// take the choice of the next power up.
Algorithm tunedAlgorithm(const TuningTable& t, CollKind coll, size_t bytes);
Protocol tunedProtocol(const TuningTable& t, CollKind coll, size_t bytes);

// The cost model's time (us) for the algorithm the table picks. A
// point-to-point transfer (coll SendRecv) is costed as one hop of the ring.
double predictedTimeUs(const TuningTable& t, CollKind coll, size_t bytes);

// "64 KiB", "3 MiB", "1000 B": exact sizes in the largest unit that divides them.
std::string sizeText(size_t bytes);

// Logs, per collective, the cost table and the size ranges of each choice (INFO, TUNING).
void logTuningTable(const TuningTable& t);

}  // namespace gyre
