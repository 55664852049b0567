// A tuner plugin's say over one call's plan. gyre's cost model fills NCCL's
// cost table (microseconds per algorithm x protocol) with its own estimates
// for what it can run here:
//
//   gyre Ring/Simple, Ring/LL  ->  NCCL_ALGO_RING x NCCL_PROTO_SIMPLE, _LL
//   gyre Tree/Simple, Tree/LL  ->  NCCL_ALGO_TREE x NCCL_PROTO_SIMPLE, _LL
//
// and marks every other entry NCCL_ALGO_PROTO_IGNORE (-1): LL128, CollNet,
// NVLS and PAT, which gyre does not have, entries this communicator cannot run
// (LL on host memory, Tree for a collective without one) and entries
// NCCL_ALGO / NCCL_PROTO exclude (so the plugin chooses within them, as in
// NCCL). gyre's Direct has no index in NCCL's table: it keeps its own
// estimate and competes with the table's entries.
//
// The plugin may change costs and set a channel count; the cheapest entry gyre
// can run wins. A cost that is not a number of microseconds (NaN, infinite,
// negative other than -1) is ignored for that entry; an entry the plugin makes
// cheapest that gyre cannot run is skipped; a channel count outside 1..the
// rings made at init is ignored; each with one INFO line per communicator.
#pragma once

#include <cstddef>
#include <vector>

#include "src/plan/cost_model.h"
#include "src/plan/planner.h"
#include "src/plan/tuner_plugin.h"

namespace gyre {

struct TunerChoice {
  bool answered = false;  // getCollInfo returned ncclSuccess
  int entry = -1;         // index into the CostTable's entries; -1: nothing gyre runs is left (keep its own)
  int ownEntry = -1;      // the entry gyre's costs alone pick among `runs`
  int nchannels = 0;      // 0: the plugin left the channels to gyre
};

// Asks `s` about the call `costs` describes (costs.in: collective, bytes).
// whyNot[i]: why this communicator cannot run costs.entries[i], or null
// where it can.
TunerChoice consultTuner(const TunerSession& s, const CostTable& costs, const std::vector<const char*>& whyNot,
                         int maxChannels);

// planCollective's use of ctx.tuner: asks the plugin about this call and
// applies its answer to `plan` (algorithm, protocol, channels and, for a v6
// plugin with getChunkSize, the bytes of a pipeline step; NCCL clamps that to
// what a step can hold, and so does gyre). True when the algorithm or
// protocol is the plugin's rather than gyre's own choice: the plan then runs
// as named, without gyre's own variants (recursive doubling, single copy).
bool steerPlan(const PlanContext& ctx, CollKind coll, size_t bytes, size_t typeSize, Plan* plan);

// NCCL's names for cost-table rows and columns ("RING", "LL128", ...).
const char* ncclAlgoName(int algo);
const char* ncclProtoName(int proto);

}  // namespace gyre
