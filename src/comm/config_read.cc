#include "src/comm/config_read.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {
namespace {

constexpr unsigned kFirstConfigVersion = NCCL_VERSION(2, 14, 0);  // ncclConfig_t appeared in NCCL 2.14
// From NCCL 2.28 on, a config's `size` must cover every field its version
// has (NCCL 2.28: ncclConfig_v22800, 80 bytes; 2.29: ncclConfig_v22900,
// 88 bytes). Fields of later releases are read where `size` covers them.
constexpr unsigned kSizeCheckedFrom = NCCL_VERSION(2, 28, 0);
constexpr unsigned kSizeCheckedTo = NCCL_VERSION(2, 29, 0);

// Each field after the header, with the first NCCL release whose config has
// it (the releases from which NCCL itself reads each field). splitShare and
// commName are read by NCCL whenever `size` covers them; their releases here
// are the earliest that can have them.
struct Field {
  const char* name;
  size_t offset;
  size_t bytes;
  unsigned since;
};
#define GYRE_FIELD(f, since) {#f, offsetof(ncclConfig_t, f), sizeof(ncclConfig_t::f), since}
constexpr Field kFields[] = {
    GYRE_FIELD(blocking, NCCL_VERSION(2, 14, 0)),
    GYRE_FIELD(cgaClusterSize, NCCL_VERSION(2, 17, 0)),
    GYRE_FIELD(minCTAs, NCCL_VERSION(2, 17, 0)),
    GYRE_FIELD(maxCTAs, NCCL_VERSION(2, 17, 0)),
    GYRE_FIELD(netName, NCCL_VERSION(2, 17, 0)),
    GYRE_FIELD(splitShare, NCCL_VERSION(2, 18, 0)),
    GYRE_FIELD(trafficClass, NCCL_VERSION(2, 25, 0)),
    GYRE_FIELD(commName, NCCL_VERSION(2, 25, 0)),
    GYRE_FIELD(collnetEnable, NCCL_VERSION(2, 27, 0)),
    GYRE_FIELD(CTAPolicy, NCCL_VERSION(2, 27, 0)),
    GYRE_FIELD(shrinkShare, NCCL_VERSION(2, 27, 0)),
    GYRE_FIELD(nvlsCTAs, NCCL_VERSION(2, 27, 0)),
    GYRE_FIELD(nChannelsPerNetPeer, NCCL_VERSION(2, 28, 0)),
    GYRE_FIELD(nvlinkCentricSched, NCCL_VERSION(2, 28, 0)),
    GYRE_FIELD(graphUsageMode, NCCL_VERSION(2, 29, 0)),
    GYRE_FIELD(numRmaCtx, NCCL_VERSION(2, 29, 0)),
    GYRE_FIELD(maxP2pPeers, NCCL_VERSION(2, 30, 0)),
    GYRE_FIELD(graphStreamOrdering, NCCL_VERSION(2, 30, 0)),
    GYRE_FIELD(launchOrderImplicit, NCCL_VERSION(2, 31, 0)),
    GYRE_FIELD(numRmaSig, NCCL_VERSION(2, 31, 0)),
    GYRE_FIELD(rmaEagerInit, NCCL_VERSION(2, 31, 0)),
    GYRE_FIELD(hostCftMode, NCCL_VERSION(2, 31, 0)),
    GYRE_FIELD(nvlsHostMode, NCCL_VERSION(2, 31, 0)),
};
#undef GYRE_FIELD

// "2.17.0" for 21700; codes below 10000 are the pre-2.9 encoding (X*1000+Y*100+Z).
std::string versionText(unsigned code) {
  unsigned major = code >= 10000 ? code / 10000 : code / 1000;
  unsigned minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

bool undefOr(int v, bool ok) { return v == NCCL_CONFIG_UNDEF_INT || ok; }

// The values NCCL refuses, so a program that NCCL would stop is stopped here too.
ncclResult_t checkValues(const ncclConfig_t& c, const char* caller) {
  struct Check {
    const char* name;
    int value;
    bool ok;
    const char* allowed;
  };
  const Check checks[] = {
      {"blocking", c.blocking, undefOr(c.blocking, c.blocking == 0 || c.blocking == 1), "0 or 1"},
      {"cgaClusterSize", c.cgaClusterSize, undefOr(c.cgaClusterSize, c.cgaClusterSize >= 0), "at least 0"},
      {"minCTAs", c.minCTAs, undefOr(c.minCTAs, c.minCTAs > 0), "at least 1"},
      {"maxCTAs", c.maxCTAs, undefOr(c.maxCTAs, c.maxCTAs > 0), "at least 1"},
      {"splitShare", c.splitShare, undefOr(c.splitShare, c.splitShare == 0 || c.splitShare == 1), "0 or 1"},
      {"collnetEnable", c.collnetEnable, undefOr(c.collnetEnable, c.collnetEnable == 0 || c.collnetEnable == 1),
       "0 or 1"},
      {"CTAPolicy", c.CTAPolicy,
       undefOr(c.CTAPolicy, c.CTAPolicy >= NCCL_CTA_POLICY_DEFAULT && c.CTAPolicy <= NCCL_CTA_POLICY_ZERO), "0..2"},
      {"shrinkShare", c.shrinkShare, undefOr(c.shrinkShare, c.shrinkShare == 0 || c.shrinkShare == 1), "0 or 1"},
      {"nvlsCTAs", c.nvlsCTAs, undefOr(c.nvlsCTAs, c.nvlsCTAs > 0), "at least 1"},
      {"nChannelsPerNetPeer", c.nChannelsPerNetPeer, undefOr(c.nChannelsPerNetPeer, c.nChannelsPerNetPeer > 0),
       "at least 1"},
      {"nvlinkCentricSched", c.nvlinkCentricSched,
       undefOr(c.nvlinkCentricSched, c.nvlinkCentricSched == 0 || c.nvlinkCentricSched == 1), "0 or 1"},
      {"launchOrderImplicit", c.launchOrderImplicit,
       undefOr(c.launchOrderImplicit, c.launchOrderImplicit == 0 || c.launchOrderImplicit == 1), "0 or 1"},
      {"rmaEagerInit", c.rmaEagerInit, undefOr(c.rmaEagerInit, c.rmaEagerInit == 0 || c.rmaEagerInit == 1),
       "0 or 1"},
      {"hostCftMode", c.hostCftMode,
       undefOr(c.hostCftMode, c.hostCftMode >= ncclHostCftEnable && c.hostCftMode <= ncclHostCftFallback),
       "ncclHostCftEnable, ncclHostCftDisable or ncclHostCftFallback (1..3)"},
      {"nvlsHostMode", c.nvlsHostMode, undefOr(c.nvlsHostMode, c.nvlsHostMode >= 0),
       "ncclNvlsHostModeEnable or ncclNvlsHostModeDisable* flags (at least 0)"},
  };
  for (const Check& k : checks)
    if (!k.ok) return fail(ncclInvalidArgument, "%s: config.%s=%d must be %s", caller, k.name, k.value, k.allowed);
  if (c.minCTAs != NCCL_CONFIG_UNDEF_INT && c.maxCTAs != NCCL_CONFIG_UNDEF_INT && c.minCTAs > c.maxCTAs)
    return fail(ncclInvalidArgument, "%s: config.minCTAs=%d exceeds config.maxCTAs=%d", caller, c.minCTAs, c.maxCTAs);
  return ncclSuccess;
}

}  // namespace

ncclResult_t readConfig(const ncclConfig_t* config, const char* caller, ncclConfig_t* out) {
  *out = ncclConfig_t NCCL_CONFIG_INITIALIZER;
  if (!config) return ncclSuccess;
  // The header (size, magic, version) is in every release's struct; nothing
  // past it is touched before `size` and `version` say it is there.
  size_t size = 0;
  unsigned magic = 0, version = 0;
  memcpy(&size, reinterpret_cast<const char*>(config) + offsetof(ncclConfig_t, size), sizeof(size));
  memcpy(&magic, reinterpret_cast<const char*>(config) + offsetof(ncclConfig_t, magic), sizeof(magic));
  memcpy(&version, reinterpret_cast<const char*>(config) + offsetof(ncclConfig_t, version), sizeof(version));
  if (magic != NCCL_CONFIG_MAGIC)
    return fail(ncclInvalidArgument,
                "%s: config.magic is 0x%x, not 0x%x: the config was not initialized with NCCL_CONFIG_INITIALIZER",
                caller, magic, NCCL_CONFIG_MAGIC);
  if (version < kFirstConfigVersion)
    return fail(ncclInvalidArgument, "%s: config.version=%u (NCCL %s) predates ncclConfig_t, which NCCL %s introduced",
                caller, version, versionText(version).c_str(), versionText(kFirstConfigVersion).c_str());
  const size_t headerAndBlocking = offsetof(ncclConfig_t, blocking) + sizeof(int);
  if (size < headerAndBlocking)
    return fail(ncclInvalidArgument,
                "%s: config.size=%zu is smaller than the %zu bytes of every ncclConfig_t (NCCL %s on)", caller, size,
                headerAndBlocking, versionText(kFirstConfigVersion).c_str());
  if (version >= kSizeCheckedFrom) {
    unsigned layout = std::min(version, kSizeCheckedTo) / 100 * 100;
    size_t needed = 0;
    for (const Field& f : kFields)
      if (f.since <= layout) needed = std::max(needed, f.offset + f.bytes);
    needed = (needed + alignof(ncclConfig_t) - 1) / alignof(ncclConfig_t) * alignof(ncclConfig_t);
    if (size < needed)
      return fail(ncclInvalidArgument,
                  "%s: config.size=%zu is smaller than the %zu bytes of ncclConfig_t in NCCL %s, which "
                  "config.version=%u (NCCL %s) claims",
                  caller, size, needed, versionText(layout).c_str(), version, versionText(version).c_str());
  }
  if (version > NCCL_VERSION_CODE)
    GYRE_INFO("INIT", "%s: config from NCCL %s; gyre implements NCCL %s and reads only the fields that has", caller,
              versionText(version).c_str(), versionText(NCCL_VERSION_CODE).c_str());
  out->size = sizeof(ncclConfig_t);
  out->version = version;
  for (const Field& f : kFields)
    if (f.since <= version && f.offset + f.bytes <= size)
      memcpy(reinterpret_cast<char*>(out) + f.offset, reinterpret_cast<const char*>(config) + f.offset, f.bytes);
  return checkValues(*out, caller);
}

}  // namespace gyre
