#include "src/plan/planner.h"

#include <algorithm>
#include <string>
#include <vector>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/plan/tuner_steer.h"
#include "src/sched/chunking.h"
#include "src/transport/fifo.h"

namespace gyre {
namespace {

const std::vector<std::string> kProtocols = {"Simple", "LL"};

// The algorithm a per-call selection gives: the table's pick if the call
// allows it and it can run here, else the first allowed one that can (Ring,
// Tree, Direct). False if none can.
bool selectedAlgorithm(const PlanContext& ctx, CollKind coll, CallSelection sel, Algorithm tuned, Algorithm* out) {
  auto allowed = [&](Algorithm a) { return (sel.allowed >> static_cast<int>(a)) & 1; };
  auto runs = [&](Algorithm a) {
    switch (a) {
      case Algorithm::Ring: return true;
      case Algorithm::Tree: return ctx.trees && coll == CollKind::AllReduce;
      case Algorithm::Direct: return ctx.meshConnections && coll != CollKind::Reduce && coll != CollKind::SendRecv;
    }
    return false;
  };
  if (allowed(tuned) && runs(tuned)) return *out = tuned, true;
  for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct})
    if (allowed(a) && runs(a)) return *out = a, true;
  return false;
}

std::string selectionText(unsigned char allowed) {
  std::string text;
  for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct})
    if ((allowed >> static_cast<int>(a)) & 1) text += std::string(text.empty() ? "" : ",") + algorithmName(a);
  return text;
}

}  // namespace

ncclResult_t validateAlgorithmSettings() {
  std::vector<std::string> chosen;
  GYRE_CHECK(parseSelection("NCCL_ALGO", env::getString("NCCL_ALGO"), algorithmNames(), &chosen));
  return parseSelection("NCCL_PROTO", env::getString("NCCL_PROTO"), kProtocols, &chosen);
}

ncclResult_t planCollective(const PlanContext& ctx, CollKind coll, size_t count, size_t typeSize, Plan* plan,
                            CallSelection selection) {
  // The host executor runs Simple only (its shared-memory steps of up to 32
  // bytes already travel in the cache line their flag is in): an NCCL_PROTO
  // without Simple cannot be honoured there, so it is an error, not a silent
  // fallback. Staged device calls keep NCCL's leniency (they run kernels
  // where they can).
  if (ctx.tuning->simpleExcluded && ctx.tuning->inputs.hostMemory)
    return fail(ncclInvalidUsage,
                "NCCL_PROTO=%s: a host-memory communicator runs only the Simple protocol (LL is a device-kernel "
                "protocol); Simple can run here",
                env::getString("NCCL_PROTO").c_str());
  plan->protocol = Protocol::Simple;
  // Enough bytes per channel that splitting pays for its extra steps.
  const HostThresholds& th = ctx.tuning->host;
  size_t perChannel = count * typeSize / (ctx.kernels ? kMinBytesPerKernelChannel : std::max<size_t>(1, th.minBytesPerChannel));
  if (!ctx.kernels && ctx.shmRings && ctx.nranks == 2) perChannel = 0;
  plan->nchannels = static_cast<int>(std::clamp<size_t>(perChannel, ctx.minChannels, ctx.ringChannels));
  plan->alignElems = alignElements(typeSize);
  plan->algorithm = Algorithm::Ring;
  size_t bytes = collectiveBytes(coll, count, typeSize, ctx.nranks);
  // 3+ host ranks: a second ring lets a rank work on one channel while the
  // other waits for a peer that has no core just now.
  if (!ctx.kernels && ctx.nranks > 2 && coll == CollKind::AllReduce &&
      bytes >= th.twoChannelAllReduceMinBytes)
    plan->nchannels = std::max(plan->nchannels, std::min(2, ctx.ringChannels));
  if (ctx.kernels) plan->protocol = tunedProtocol(*ctx.tuning, coll, bytes);
  // An LL slot carries half its bytes as payload (the rest are flags).
  size_t stepBytes =
      plan->protocol == Protocol::LL ? llPayloadBytes(llSlotBytesFor(ctx.slotBytes)) : ctx.slotBytes;
  plan->chunkElems = chunkElements(stepBytes, typeSize);
  Algorithm tuned = tunedAlgorithm(*ctx.tuning, coll, bytes);
  if (ctx.trees && tuned == Algorithm::Tree) plan->algorithm = Algorithm::Tree;
  if (tuned == Algorithm::Direct && ctx.meshConnections) plan->algorithm = Algorithm::Direct;
  // A tuner plugin chooses within NCCL_ALGO / NCCL_PROTO; a per-call
  // selection below still has the last word, as in NCCL.
  const bool steered = steerPlan(ctx, coll, bytes, typeSize, plan);
  bool hasDirect = coll != CollKind::Reduce && coll != CollKind::SendRecv;
  // A per-call selection runs as named (no doubling or single-copy variant),
  // over NCCL_ALGO, as NCCL's per-call config does.
  bool callSelected = false;
  if (selection.allowed && coll != CollKind::SendRecv) {
    Algorithm chosen = plan->algorithm;
    if (selectedAlgorithm(ctx, coll, selection, plan->algorithm, &chosen)) {
      plan->algorithm = chosen;
      callSelected = true;
    } else if (selection.required) {
      return fail(ncclInvalidUsage,
                  "%s: ncclCollConfig_t.algSelection allows %s, which cannot run on this communicator (%d ranks; "
                  "Tree needs an AllReduce over the trees made at init, Direct a host-memory communicator of "
                  "3..8 ranks on one host); set forceAlgSelection=0 to let gyre choose",
                  collName(coll), selectionText(selection.allowed).c_str(), ctx.nranks);
    }
  }
  // NCCL_ALGO=Direct where no mesh exists: the table fell back to the ring;
  // on two ranks that is the direct exchange, elsewhere it is not what was asked.
  if (!callSelected && ctx.tuning->directOnly && hasDirect && !ctx.meshConnections && ctx.nranks > 2)
    return fail(ncclInvalidUsage,
                "NCCL_ALGO=%s: Direct needs a host-memory communicator of 3..8 ranks on one host "
                "(this one has %d ranks); Ring and Tree can run here",
                env::getString("NCCL_ALGO").c_str(), ctx.nranks);
  bool hasSingleCopy = coll != CollKind::Reduce && coll != CollKind::SendRecv;
  if (hasSingleCopy && ctx.singleCopy && (ctx.nranks == 2 || ctx.meshConnections)) {
    // Like doubling, a variant of the tuner's: an NCCL_ALGO naming anything
    // but Direct runs as named.
    bool otherForced = ctx.tuning->algorithmForced && !ctx.tuning->directOnly;
    plan->singleCopy = ctx.singleCopyAlways || (!otherForced && singleCopyPays(th, coll, ctx.nranks, bytes));
    // GYRE_SINGLE_COPY=always reads by reference at every size (process_vm_readv for heap buffers), auto
    // from singleCopyByReferenceMinBytes.
    plan->singleCopyByValue = plan->singleCopy && !ctx.singleCopyAlways && singleCopyByValue(th, coll, bytes);
  }
  if (coll == CollKind::AllReduce && bytes <= th.doublingMaxBytes) {
    // Doubling is the tuner's own variant: an NCCL_ALGO the user set runs as named.
    if (ctx.tuning->algorithmForced) plan->doubling = false;
    else if (ctx.nranks == 2) plan->doubling = plan->algorithm == Algorithm::Ring;
    else
      plan->doubling = ctx.doublingConnections &&
                       (plan->algorithm == Algorithm::Tree ||
                        (plan->algorithm == Algorithm::Direct && bytes > th.oneShotMaxBytesOverDoubling));
  }
  if (plan->singleCopy || callSelected || steered) plan->doubling = false;
  if (callSelected || steered) plan->singleCopy = plan->singleCopyByValue = false;
  return ncclSuccess;
}

}  // namespace gyre
