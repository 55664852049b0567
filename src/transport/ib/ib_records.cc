#include "src/transport/ib/ib_records.h"

#include <cstring>

#include "src/debug/error.h"

namespace gyre::ib {

ncclResult_t handleAddress(const void* handle, NetAddress* out) {
  Handle h;
  memcpy(&h, handle, sizeof(h));
  if (h.magic != kRecordMagic)
    return fail(ncclInvalidArgument, "NET/IB: connect() got a handle the IB network did not make");
  *out = NetAddress::fromWire(h.addr);
  if (!out->valid() || out->port() == 0)
    return fail(ncclRemoteError, "NET/IB: connect() got a handle without a valid address (family %u, port %u)",
                static_cast<unsigned>(h.addr.family), static_cast<unsigned>(h.addr.port));
  return ncclSuccess;
}

ncclResult_t checkQpInfo(const QpInfo& theirs, const QpInfo& mine, const std::string& what) {
  if (theirs.magic != kRecordMagic)
    return fail(ncclRemoteError, "NET/IB %s: the peer sent a malformed connection record", what.c_str());
  if (theirs.nqps != mine.nqps)
    return fail(ncclInvalidUsage, "NET/IB %s: NCCL_IB_QPS_PER_CONNECTION differs: the peer uses %u QPs, this rank %u",
                what.c_str(), theirs.nqps, mine.nqps);
  // The smaller MTU of the two becomes an ibv_mtu: it must be one.
  if (theirs.mtu < IBV_MTU_256 || theirs.mtu > IBV_MTU_4096)
    return fail(ncclRemoteError, "NET/IB %s: the peer sent MTU code %u, which is no IB MTU (%d..%d)", what.c_str(),
                static_cast<unsigned>(theirs.mtu), IBV_MTU_256, IBV_MTU_4096);
  return ncclSuccess;
}

}  // namespace gyre::ib
