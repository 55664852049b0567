#include "src/plan/tuning.h"

#include <algorithm>
#include <string>
#include <vector>

#include "src/config/env.h"
#include "src/debug/log.h"

namespace gyre {
namespace {

// The smallest b with 2^b >= bytes (ceil log2), at most the last bucket.
int bucketOf(size_t bytes) {
  int b = bytes <= 1 ? 0 : 64 - __builtin_clzll(static_cast<unsigned long long>(bytes - 1));
  return b < kTuningBuckets ? b : kTuningBuckets - 1;
}

CostTable tableAt(const TuningTable& t, CollKind coll, size_t bytes, const std::vector<Algorithm>& algos,
                  const std::vector<Protocol>& protos) {
  CostInputs in = t.inputs;
  in.coll = coll;
  in.bytes = bytes;
  return predictCosts(in, algos, protos);
}

// The protocols NCCL_PROTO names (an unparsable value names all).
std::vector<std::string> protocolNames() {
  std::vector<std::string> names;
  if (parseSelection("NCCL_PROTO", env::getString("NCCL_PROTO"), {"Simple", "LL"}, &names) != ncclSuccess)
    names = {"Simple", "LL"};
  return names;
}

// What NCCL_PROTO allows among what the executors run: the host executor
// runs Simple only; the device kernels Simple and LL.
std::vector<Protocol> allowedProtocols(const std::vector<std::string>& names, bool llAvailable) {
  std::vector<Protocol> out;
  for (const std::string& n : names)
    if (n == "Simple" || llAvailable) out.push_back(n == "LL" ? Protocol::LL : Protocol::Simple);
  if (out.empty()) out.push_back(Protocol::Simple);  // NCCL_PROTO=LL where only Simple runs
  return out;
}

// What NCCL_ALGO allows (validated at init; an unparsable value allows all).
std::vector<Algorithm> allowedAlgorithms() {
  std::vector<std::string> names;
  if (parseSelection("NCCL_ALGO", env::getString("NCCL_ALGO"), algorithmNames(), &names) != ncclSuccess) return {};
  std::vector<Algorithm> out;
  for (const std::string& n : names) out.push_back(algorithmNamed(n));
  return out;
}

}  // namespace

std::string sizeText(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + " " + units[u];
}

void buildTuningTable(const RingPlan& rings, int nranks, bool hostMemory, bool llAvailable, TuningTable* out) {
  out->inputs = costInputs(rings, CollKind::AllReduce, nranks, 0);
  out->inputs.hostMemory = hostMemory;
  int64_t shmOff = 0;
  out->inputs.hostSockets = hostMemory && env::getInt("NCCL_SHM_DISABLE", &shmOff) == ncclSuccess && shmOff != 0;
  std::vector<Algorithm> algos = allowedAlgorithms();
  out->algorithmForced = !env::getString("NCCL_ALGO").empty();
  out->inputs.treeForcedOnOneHost = algos.size() == 1 && algos[0] == Algorithm::Tree;
  out->directOnly = algos.size() == 1 && algos[0] == Algorithm::Direct;
  out->llAvailable = llAvailable;
  const std::vector<std::string> protoNames = protocolNames();
  out->simpleExcluded = std::find(protoNames.begin(), protoNames.end(), "Simple") == protoNames.end();
  std::vector<Protocol> protos = allowedProtocols(protoNames, llAvailable);
  out->allowedAlgos = algos;
  out->allowedProtos = protos;
  for (int c = 0; c < kTunedColls; ++c)
    for (int b = 0; b < kTuningBuckets; ++b) {
      CostTable table = tableAt(*out, static_cast<CollKind>(c), size_t{1} << b, algos, protos);
      // Nothing allowed and available (one rank, or NCCL_ALGO=Tree for a
      // collective without a tree): the ring, which every collective has.
      out->pick[c][b] = table.pick >= 0 ? table.entries[table.pick].algo : Algorithm::Ring;
      out->proto[c][b] = table.pick >= 0 ? table.entries[table.pick].proto : protos.front();
    }
}

Protocol tunedProtocol(const TuningTable& t, CollKind coll, size_t bytes) {
  int c = static_cast<int>(coll);
  if (c >= kTunedColls) return Protocol::Simple;
  return t.proto[c][bucketOf(bytes)];
}

Algorithm tunedAlgorithm(const TuningTable& t, CollKind coll, size_t bytes) {
  int c = static_cast<int>(coll);
  if (c >= kTunedColls) return Algorithm::Ring;
  return t.pick[c][bucketOf(bytes)];
}

double predictedTimeUs(const TuningTable& t, CollKind coll, size_t bytes) {
  CostInputs in = t.inputs;
  in.coll = coll;
  in.bytes = bytes;
  if (static_cast<int>(coll) >= kTunedColls) {  // one hop: a two-rank Broadcast chain on the same wires
    in.coll = CollKind::Broadcast;
    in.nranks = 2;
  }
  CostTable table = predictCosts(in, {tunedAlgorithm(t, in.coll, bytes)}, {tunedProtocol(t, in.coll, bytes)});
  return table.pick >= 0 ? table.entries[table.pick].timeUs : 0;
}

void logTuningTable(const TuningTable& t) {
  if (logLevel() < LogLevel::Info) return;
  std::vector<Algorithm> algos = allowedAlgorithms();
  for (int c = 0; c < kTunedColls; ++c) {
    CollKind coll = static_cast<CollKind>(c);
    for (const std::string& line :
         formatCostTable(tableAt(t, coll, size_t{1} << 20, algos, allowedProtocols(protocolNames(), t.llAvailable))))
      GYRE_INFO("TUNING", "%s", line.c_str());
    std::string ranges;
    int start = 0;
    for (int b = 1; b <= kTuningBuckets; ++b) {
      if (b < kTuningBuckets && t.pick[c][b] == t.pick[c][start] && t.proto[c][b] == t.proto[c][start]) continue;
      ranges += std::string(ranges.empty() ? "" : ", ") + algorithmName(t.pick[c][start]) +
                (t.proto[c][start] == Protocol::LL ? "/LL" : "") +
                (start == 0 ? "" : " above " + sizeText(size_t{1} << (start - 1))) +
                (b == kTuningBuckets ? "" : " up to " + sizeText(size_t{1} << (b - 1)));
      start = b;
    }
    if (start == kTuningBuckets && ranges.find(',') == std::string::npos) ranges += " at every size";
    GYRE_INFO("TUNING", "  %s picks: %s", collName(coll), ranges.c_str());
  }
}

}  // namespace gyre
