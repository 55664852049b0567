#include "src/plan/planner.h"

#include <algorithm>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/sched/chunking.h"

namespace gyre {
namespace {

const std::vector<std::string> kAlgorithms = {"Ring", "Tree"};
const std::vector<std::string> kProtocols = {"Simple"};

bool allowed(const std::vector<std::string>& list, const char* name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace

ncclResult_t validateAlgorithmSettings() {
  std::vector<std::string> chosen;
  GYRE_CHECK(parseSelection("NCCL_ALGO", env::getString("NCCL_ALGO"), kAlgorithms, &chosen));
  return parseSelection("NCCL_PROTO", env::getString("NCCL_PROTO"), kProtocols, &chosen);
}

ncclResult_t planCollective(const ncclComm* comm, CollKind coll, size_t count, size_t typeSize, Plan* plan) {
  // The environment is a per-process snapshot validated at init, so parse it once.
  static const std::vector<std::string> algos = [] {
    std::vector<std::string> list;
    if (parseSelection("NCCL_ALGO", env::getString("NCCL_ALGO"), kAlgorithms, &list) != ncclSuccess)
      list = kAlgorithms;
    return list;
  }();
  plan->protocol = Protocol::Simple;
  // Enough bytes per channel that splitting pays for its extra steps.
  size_t perChannel = count * typeSize / kMinBytesPerChannel;
  plan->nchannels = static_cast<int>(std::clamp<size_t>(perChannel, comm->minChannels, comm->channels.size()));
  plan->chunkElems = chunkElements(comm->slotBytes, typeSize);
  plan->alignElems = alignElements(typeSize);
  plan->algorithm = Algorithm::Ring;
  // Only AllReduce has a tree schedule; the others run their ring (or chain)
  // whatever NCCL_ALGO says, as NCCL does for algorithms a collective lacks.
  if (coll == CollKind::AllReduce && allowed(algos, "Tree") && comm->trees.size() == 2) {
    bool treeOnly = !allowed(algos, "Ring");
    if (treeOnly || (comm->nranks >= 3 && count * typeSize <= kTreeMaxBytes)) plan->algorithm = Algorithm::Tree;
  }
  return ncclSuccess;
}

}  // namespace gyre
