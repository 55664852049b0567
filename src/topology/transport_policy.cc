#include "src/topology/transport_policy.h"

#include "src/config/env.h"
#include "src/debug/error.h"

namespace gyre::topo {
namespace {

ncclResult_t level(const char* name, PathType dflt, PathType* out) {
  std::string v = env::getString(name);
  if (v.empty()) {
    *out = dflt;
    return ncclSuccess;
  }
  if (!parsePathType(v, out) || *out == PathType::NET)
    return fail(ncclInvalidArgument, "%s=\"%s\" is not valid; allowed: LOC,NVL,PIX,PXB,PHB,SYS", name, v.c_str());
  return ncclSuccess;
}

}  // namespace

ncclResult_t readTransportPolicy(TransportPolicy* out) {
  *out = TransportPolicy();
  int64_t p2pOff = 0, shmOff = 0;
  GYRE_CHECK(level("NCCL_P2P_LEVEL", out->p2pLevel, &out->p2pLevel));
  GYRE_CHECK(level("NCCL_NET_GDR_LEVEL", out->gdrLevel, &out->gdrLevel));
  GYRE_CHECK(env::getInt("NCCL_P2P_DISABLE", &p2pOff));
  GYRE_CHECK(env::getInt("NCCL_SHM_DISABLE", &shmOff));
  out->p2pDisable = p2pOff != 0;
  out->shmDisable = shmOff != 0;
  return ncclSuccess;
}

const char* edgeTransportName(EdgeTransport t) {
  switch (t) {
    case EdgeTransport::P2P: return "p2p";
    case EdgeTransport::SHM: return "shm";
    default: return "net";
  }
}

EdgeTransport chooseEdgeTransport(const Path& path, bool bothGpus, const TransportPolicy& policy) {
  if (!path.valid || path.type == PathType::NET) return EdgeTransport::NET;
  // LOC (two ranks on one GPU) is always peer-to-peer unless disabled: NCCL's
  // levels say how far P2P may reach, and a GPU does not reach beyond itself.
  if (bothGpus && !policy.p2pDisable && path.type <= policy.p2pLevel) return EdgeTransport::P2P;
  if (!policy.shmDisable) return EdgeTransport::SHM;
  return EdgeTransport::NET;
}

bool gdrAllowed(const Path& gpuToNic, const TransportPolicy& policy) {
  return gpuToNic.valid && gpuToNic.type <= policy.gdrLevel;
}

}  // namespace gyre::topo
