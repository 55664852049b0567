#include "src/plan/tuner_steer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "src/plan/tuning.h"
#include "src/sched/chunking.h"
#include "src/transport/fifo.h"

namespace gyre {
namespace {

using namespace tuner;

// The cell of gyre's entry in NCCL's table, or false (Direct has none).
bool cellOf(const CostEntry& e, int* algo, int* proto) {
  if (e.algo == Algorithm::Direct) return false;
  *algo = e.algo == Algorithm::Ring ? kAlgoRing : kAlgoTree;
  *proto = e.proto == Protocol::Simple ? kProtoSimple : kProtoLL;
  return true;
}

Func funcOf(CollKind c) {
  switch (c) {
    case CollKind::Broadcast: return kFuncBroadcast;
    case CollKind::Reduce: return kFuncReduce;
    case CollKind::AllGather: return kFuncAllGather;
    case CollKind::ReduceScatter: return kFuncReduceScatter;
    default: return kFuncAllReduce;
  }
}

std::string cellName(int algo, int proto) { return std::string(ncclAlgoName(algo)) + "/" + ncclProtoName(proto); }

// Why gyre cannot run a cell the plugin costed.
const char* whyNotCell(const CostTable& costs, const std::vector<const char*>& whyNot, int algo, int proto) {
  for (size_t i = 0; i < costs.entries.size(); ++i) {
    int a = 0, p = 0;
    if (cellOf(costs.entries[i], &a, &p) && a == algo && p == proto && whyNot[i]) return whyNot[i];
  }
  return "gyre has no such algorithm or protocol";
}

}  // namespace

const char* ncclAlgoName(int algo) {
  static const char* names[kNumAlgorithms] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
                                              "NVLS", "NVLS_TREE", "PAT"};
  return algo >= 0 && algo < kNumAlgorithms ? names[algo] : "?";
}

const char* ncclProtoName(int proto) {
  static const char* names[kNumProtocols] = {"LL", "LL128", "SIMPLE"};
  return proto >= 0 && proto < kNumProtocols ? names[proto] : "?";
}

TunerChoice consultTuner(const TunerSession& s, const CostTable& costs, const std::vector<const char*>& whyNot,
                         int maxChannels) {
  TunerChoice out;
  std::vector<bool> runs(whyNot.size());
  for (size_t i = 0; i < runs.size(); ++i) runs[i] = whyNot[i] == nullptr;
  const char* coll = collName(costs.in.coll) + 4;  // "AllReduce"
  const size_t n = costs.entries.size();
  for (size_t i = 0; i < n; ++i)
    if (runs[i] && (out.ownEntry < 0 || costs.entries[i].timeUs < costs.entries[out.ownEntry].timeUs))
      out.ownEntry = static_cast<int>(i);

  tuner::CostCells table, before;
  for (auto& row : table)
    for (float& c : row) c = kIgnore;
  for (size_t i = 0; i < n; ++i) {
    int a = 0, p = 0;
    if (runs[i] && cellOf(costs.entries[i], &a, &p)) table[a][p] = static_cast<float>(costs.entries[i].timeUs);
  }
  memcpy(before, table, sizeof table);
  int nch = 0;
  if (!s.collInfo(funcOf(costs.in.coll), costs.in.bytes, 1, table, &nch)) return out;
  out.answered = true;

  // Entry by entry: a value that is not a time keeps gyre's estimate.
  int cheapA = -1, cheapP = -1;  // the plugin's cheapest cell, runnable or not
  for (int a = 0; a < kNumAlgorithms; ++a)
    for (int p = 0; p < kNumProtocols; ++p) {
      float& v = table[a][p];
      if (v == before[a][p] || v == kIgnore) continue;
      if (!std::isfinite(v) || v < 0) {
        char text[256];
        snprintf(text, sizeof text,
                 "tuner plugin %s set %s for %s to %g, which is not a time (microseconds >= 0, or -1 to leave the "
                 "entry out): that entry keeps gyre's estimate",
                 s.label().c_str(), cellName(a, p).c_str(), coll, double(v));
        s.noteOnce("value:" + cellName(a, p) + ":" + coll, text);
        v = before[a][p];
      }
    }
  for (int a = 0; a < kNumAlgorithms; ++a)
    for (int p = 0; p < kNumProtocols; ++p)
      if (table[a][p] >= 0 && (cheapA < 0 || table[a][p] < table[cheapA][cheapP])) cheapA = a, cheapP = p;

  // The cheapest entry gyre runs: the table's cells it filled, and Direct at its own estimate.
  double best = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!runs[i]) continue;
    int a = 0, p = 0;
    double t = cellOf(costs.entries[i], &a, &p) ? table[a][p] : costs.entries[i].timeUs;
    if (t < 0) continue;  // the plugin left it out
    if (out.entry < 0 || t < best) out.entry = static_cast<int>(i), best = t;
  }
  if (cheapA >= 0 && before[cheapA][cheapP] == kIgnore && (out.entry < 0 || table[cheapA][cheapP] < best)) {
    char text[320];
    snprintf(text, sizeof text, "tuner plugin %s makes %s cheapest for %s of %zu bytes, which gyre cannot run here "
             "(%s): skipped",
             s.label().c_str(), cellName(cheapA, cheapP).c_str(), coll, costs.in.bytes,
             whyNotCell(costs, whyNot, cheapA, cheapP));
    s.noteOnce("unrunnable:" + cellName(cheapA, cheapP) + ":" + coll, text);
  }
  if (out.entry < 0 && out.ownEntry >= 0)
    s.noteOnce(std::string("nothing-left:") + coll, "tuner plugin " + s.label() + " leaves no entry gyre can run for " +
                                                        coll + ": gyre's own choice stands there");

  if (nch != 0 && (nch < 1 || nch > maxChannels)) {
    s.noteOnce(std::string("channels:") + std::to_string(nch),
               "tuner plugin " + s.label() + " asks for " + std::to_string(nch) + " channels for " + coll +
                   "; this communicator has 1.." + std::to_string(maxChannels) + ": ignored");
    nch = 0;
  }
  out.nchannels = nch;
  return out;
}

bool steerPlan(const PlanContext& ctx, CollKind coll, size_t bytes, size_t typeSize, Plan* plan) {
  if (!ctx.tuner || static_cast<int>(coll) >= kTunedColls || ctx.nranks < 2) return false;
  const TuningTable& t = *ctx.tuning;
  CostInputs in = t.inputs;
  in.coll = coll;
  in.bytes = bytes;
  const CostTable costs = predictCosts(in, t.allowedAlgos, t.allowedProtos);
  std::vector<const char*> whyNot(costs.entries.size(), nullptr);
  for (size_t i = 0; i < whyNot.size(); ++i) {
    const CostEntry& e = costs.entries[i];
    if (!e.available) whyNot[i] = e.unavailableWhy;
    else if (e.proto == Protocol::LL && !ctx.kernels) whyNot[i] = "LL runs only in device kernels";
    else if (!e.allowed) whyNot[i] = "NCCL_ALGO / NCCL_PROTO exclude it";
    else if (e.algo == Algorithm::Tree && !ctx.trees) whyNot[i] = "no trees were connected";
    else if (e.algo == Algorithm::Direct && !ctx.meshConnections) whyNot[i] = "no mesh connections";
  }
  const TunerChoice c = consultTuner(*ctx.tuner, costs, whyNot, ctx.ringChannels);
  if (!c.answered) return false;
  const bool steered = c.entry >= 0 && c.entry != c.ownEntry;
  if (steered) {
    plan->algorithm = costs.entries[c.entry].algo;
    plan->protocol = costs.entries[c.entry].proto;
  }
  if (c.nchannels > 0) plan->nchannels = c.nchannels;
  const size_t stepBytes =
      plan->protocol == Protocol::LL ? llPayloadBytes(llSlotBytesFor(ctx.slotBytes)) : ctx.slotBytes;
  plan->chunkElems = chunkElements(stepBytes, typeSize);
  CostEntry chosen;
  chosen.algo = plan->algorithm;
  chosen.proto = plan->protocol;
  int algo = 0, proto = 0;
  size_t chunk = plan->chunkElems * typeSize;
  if (cellOf(chosen, &algo, &proto) &&
      ctx.tuner->chunkSize(funcOf(coll), bytes, algo, proto, plan->nchannels, &chunk) &&
      chunk != plan->chunkElems * typeSize) {
    if (chunk == 0)
      ctx.tuner->noteOnce("chunk:0", "tuner plugin " + ctx.tuner->label() +
                                         " sets a chunk size of 0 bytes: ignored, gyre keeps its own");
    else
      plan->chunkElems = chunkElements(std::min(chunk, stepBytes), typeSize);
  }
  return steered;
}

}  // namespace gyre
