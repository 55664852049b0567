#include "src/plan/planner.h"

#include <algorithm>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "src/comm/comm_topology.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/plan/tuning.h"
#include "src/sched/chunking.h"
#include "transport/fifo.h"

namespace gyre {
namespace {

const std::vector<std::string> kAlgorithms = {"Ring", "Tree"};
const std::vector<std::string> kProtocols = {"Simple", "LL"};

}  // namespace

ncclResult_t validateAlgorithmSettings() {
  std::vector<std::string> chosen;
  GYRE_CHECK(parseSelection("NCCL_ALGO", env::getString("NCCL_ALGO"), kAlgorithms, &chosen));
  return parseSelection("NCCL_PROTO", env::getString("NCCL_PROTO"), kProtocols, &chosen);
}

ncclResult_t planCollective(const ncclComm* comm, CollKind coll, size_t count, size_t typeSize, Plan* plan) {
  plan->protocol = Protocol::Simple;
  // Enough bytes per channel that splitting pays for its extra steps.
  size_t perChannel = count * typeSize / kMinBytesPerChannel;
  plan->nchannels = static_cast<int>(std::clamp<size_t>(perChannel, comm->minChannels, comm->channels.size()));
  plan->alignElems = alignElements(typeSize);
  plan->algorithm = Algorithm::Ring;
  size_t bytes = collectiveBytes(coll, count, typeSize, comm->nranks);
  if (comm->deviceKernels) plan->protocol = tunedProtocol(comm->topology->tuning, coll, bytes);
  // An LL slot carries half its bytes as payload (the rest are flags).
  size_t stepBytes =
      plan->protocol == Protocol::LL ? llPayloadBytes(llSlotBytesFor(comm->slotBytes)) : comm->slotBytes;
  plan->chunkElems = chunkElements(stepBytes, typeSize);
  if (comm->trees.size() == 2 && tunedAlgorithm(comm->topology->tuning, coll, bytes) == Algorithm::Tree)
    plan->algorithm = Algorithm::Tree;
  if (coll == CollKind::AllReduce && bytes <= kDoublingMaxBytes) {
    const TuningTable& t = comm->topology->tuning;
    // Doubling is the tuner's own variant: an NCCL_ALGO the user set runs as named.
    if (t.algorithmForced) plan->doubling = false;
    else if (comm->nranks == 2) plan->doubling = plan->algorithm == Algorithm::Ring;
    else plan->doubling = !comm->doubling.send.empty() && plan->algorithm == Algorithm::Tree;
  }
  return ncclSuccess;
}

}  // namespace gyre
