#include "src/transport/ib/ib_devices.h"

#include <cstring>
#include <mutex>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/transport/ib/hca_filter.h"
#include "src/transport/ib/verbs_api.h"

namespace gyre::ib {
namespace {

bool isIpv4Mapped(const ibv_gid& g) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g.raw, kPrefix, sizeof(kPrefix)) == 0;
}

// RoCE: NCCL_IB_GID_INDEX, else the first RoCE v2 GID holding an IPv4 address.
ncclResult_t chooseGid(const VerbsApi* v, IbPort* p, int tableLen) {
  int64_t want = -1;
  GYRE_CHECK(env::getInt("NCCL_IB_GID_INDEX", &want));
  if (want >= 0) {
    if (want >= tableLen)
      return fail(ncclInvalidArgument, "NCCL_IB_GID_INDEX=%lld: port %s has %d GIDs (indexes 0..%d)",
                  static_cast<long long>(want), p->label().c_str(), tableLen, tableLen - 1);
    p->gidIndex = static_cast<int>(want);
  } else {
    p->gidIndex = -1;
    for (int i = 0; i < tableLen && p->gidIndex < 0; ++i) {
      ibv_gid_entry e{};
      if (v->queryGidEx && v->queryGidEx(p->ctx, p->port, i, &e, 0, sizeof(e)) == 0 &&
          e.gid_type == IBV_GID_TYPE_ROCE_V2 && isIpv4Mapped(e.gid))
        p->gidIndex = i;
    }
    if (p->gidIndex < 0) p->gidIndex = 0;  // no typed table: the default GID
  }
  if (v->queryGid(p->ctx, static_cast<uint8_t>(p->port), p->gidIndex, &p->gid) != 0)
    return fail(ncclSystemError, "ibv_query_gid(%s, index %d) failed: %s", p->label().c_str(), p->gidIndex,
                strerror(errno));
  return ncclSuccess;
}

int speedOf(const ibv_port_attr& a) {
  // active_speed codes (verbs.h) in Mb/s per lane; active_width codes 1,2,4,8 -> 1,4,8,12 lanes.
  int lane = 2500;
  switch (a.active_speed) {
    case 2: lane = 5000; break;
    case 4: case 8: lane = 10000; break;
    case 16: lane = 14000; break;
    case 32: lane = 25000; break;
    case 64: lane = 50000; break;
    case 128: lane = 100000; break;
    default: break;
  }
  int lanes = a.active_width == 2 ? 4 : a.active_width == 4 ? 8 : a.active_width == 8 ? 12 : 1;
  return lane * lanes;
}

ncclResult_t discover(std::vector<IbPort>* out, std::string* whyNone) {
  int64_t disabled = 0;
  GYRE_CHECK(env::getInt("NCCL_IB_DISABLE", &disabled));
  if (disabled) {
    *whyNone = "NCCL_IB_DISABLE=1";
    return ncclSuccess;
  }
  HcaFilter filter;
  const std::string spec = env::getString("NCCL_IB_HCA");
  GYRE_CHECK(parseHcaFilter(spec, &filter));
  const VerbsApi* v = verbs(whyNone);
  if (!v) return ncclSuccess;
  int n = 0;
  ibv_device** list = v->getDeviceList(&n);
  if (!list || n == 0) {
    if (list) v->freeDeviceList(list);
    *whyNone = "no verbs devices (" + v->library + ")";
    return ncclSuccess;
  }
  std::string seen;  // every active port, for the error when the filter allows none
  ncclResult_t result = ncclSuccess;
  for (int d = 0; d < n && result == ncclSuccess; ++d) {
    const std::string name = v->getDeviceName(list[d]);
    ibv_context* ctx = v->openDevice(list[d]);
    if (!ctx) {
      GYRE_INFO("NET", "IB: cannot open %s: %s", name.c_str(), strerror(errno));
      continue;
    }
    ibv_device_attr da{};
    if (v->queryDevice(ctx, &da) != 0) {
      GYRE_INFO("NET", "IB: ibv_query_device(%s) failed: %s", name.c_str(), strerror(errno));
      v->closeDevice(ctx);
      continue;
    }
    ibv_pd* pd = nullptr;
    for (int port = 1; port <= da.phys_port_cnt; ++port) {
      ibv_port_attr pa{};
      if (v->queryPort(ctx, static_cast<uint8_t>(port), &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
      IbPort p;
      p.device = name;
      p.port = port;
      seen += (seen.empty() ? "" : ", ") + p.label() + (pa.link_layer == IBV_LINK_LAYER_ETHERNET ? " (RoCE)" : " (IB)");
      if (!hcaAllowed(filter, name, port)) continue;
      p.ctx = ctx;
      p.lid = pa.lid;
      p.linkLayer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
      p.mtu = pa.active_mtu;
      p.speedMbps = speedOf(pa);
      if ((result = chooseGid(v, &p, pa.gid_tbl_len)) != ncclSuccess) break;
      if (!pd && !(pd = v->allocPd(ctx))) {
        result = fail(ncclSystemError, "ibv_alloc_pd(%s) failed: %s", name.c_str(), strerror(errno));
        break;
      }
      p.pd = pd;
      out->push_back(p);
    }
    if (!pd) v->closeDevice(ctx);
  }
  v->freeDeviceList(list);
  if (result != ncclSuccess) return result;
  if (out->empty()) {
    if (!spec.empty() && !seen.empty())
      return fail(ncclInvalidArgument, "NCCL_IB_HCA=%s allows none of the active ports; those that exist: %s",
                  spec.c_str(), seen.c_str());
    *whyNone = "no active port on the verbs devices of " + v->library;
  }
  for (const IbPort& p : *out)
    GYRE_INFO("NET", "IB: using %s (%s, gid index %d, %d Mb/s)", p.label().c_str(),
              p.linkLayer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB", p.gidIndex, p.speedMbps);
  return ncclSuccess;
}

}  // namespace

ncclResult_t ibPorts(const std::vector<IbPort>** ports, std::string* whyNone) {
  static std::mutex mu;
  static bool done = false;
  static ncclResult_t result = ncclSuccess;
  static std::string error, why;
  // The ports hold the devices' contexts and protection domains, opened once
  // for the life of the process: the table is never destroyed, so a
  // communicator still running while the process exits never reads a
  // destroyed table, and the contexts stay reachable.
  static std::vector<IbPort>& found = *new std::vector<IbPort>;
  std::lock_guard<std::mutex> lock(mu);
  if (!done) {
    result = discover(&found, &why);
    if (result != ncclSuccess) error = lastErrorText();
    done = true;
  }
  if (result != ncclSuccess) return fail(result, "%s", error.c_str());
  *ports = &found;
  *whyNone = why;
  return ncclSuccess;
}

}  // namespace gyre::ib
