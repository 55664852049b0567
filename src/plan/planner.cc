#include "src/plan/planner.h"

#include "src/comm/comm.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/sched/chunking.h"

namespace gyre {

ncclResult_t validateAlgorithmSettings() {
  std::vector<std::string> allowed;
  GYRE_CHECK(parseSelection("NCCL_ALGO", env::getString("NCCL_ALGO"), {"Ring"}, &allowed));
  return parseSelection("NCCL_PROTO", env::getString("NCCL_PROTO"), {"Simple"}, &allowed);
}

ncclResult_t planCollective(const ncclComm* comm, CollKind, size_t, size_t typeSize, Plan* plan) {
  plan->algorithm = Algorithm::Ring;
  plan->protocol = Protocol::Simple;
  plan->nchannels = static_cast<int>(comm->channels.size());
  plan->chunkElems = chunkElements(comm->slotBytes, typeSize);
  plan->alignElems = alignElements(typeSize);
  return ncclSuccess;
}

}  // namespace gyre
