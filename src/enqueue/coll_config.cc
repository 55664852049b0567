#include "src/enqueue/coll_config.h"

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/plan/algorithm.h"

namespace gyre {
namespace {

// ncclCollConfig_t appeared in NCCL 2.31 (ncclCollConfig_v23100): every
// config has at least that release's fields.
constexpr unsigned kFirstCollConfigVersion = NCCL_VERSION(2, 31, 0);
constexpr size_t kFirstCollConfigSize = offsetof(ncclCollConfig_t, userProfilerTag) + sizeof(uint64_t);

bool undefOr(int v, bool ok) { return v == NCCL_CONFIG_UNDEF_INT || ok; }

}  // namespace

ncclResult_t readCollConfig(const ncclCollConfig_t* config, const char* caller, CallOptions* out) {
  *out = CallOptions{};
  if (!config) return ncclSuccess;
  if (config->magic != NCCL_API_MAGIC)
    return fail(ncclInvalidArgument,
                "%s: config->magic is 0x%x, not 0x%x: the config was not initialized with NCCL_COLLCONFIG_INITIALIZER",
                caller, config->magic, NCCL_API_MAGIC);
  if (config->version < kFirstCollConfigVersion)
    return fail(ncclInvalidArgument, "%s: config->version=%u predates ncclCollConfig_t (NCCL 2.31, %u)", caller,
                config->version, kFirstCollConfigVersion);
  if (config->size < kFirstCollConfigSize)
    return fail(ncclInvalidArgument, "%s: config->size=%zu is smaller than the %zu bytes of every ncclCollConfig_t",
                caller, config->size, kFirstCollConfigSize);
  const ncclCollConfig_t& c = *config;
  struct Check {
    const char* name;
    int value;
    bool ok;
    const char* allowed;
  };
  const Check checks[] = {
      {"minCTAs", c.minCTAs, undefOr(c.minCTAs, c.minCTAs > 0), "at least 1"},
      {"maxCTAs", c.maxCTAs, undefOr(c.maxCTAs, c.maxCTAs > 0), "at least 1"},
      {"nvlsCTAs", c.nvlsCTAs, undefOr(c.nvlsCTAs, c.nvlsCTAs > 0), "at least 1"},
      {"cgaClusterSize", c.cgaClusterSize, undefOr(c.cgaClusterSize, c.cgaClusterSize >= 0), "at least 0"},
      {"forceAlgSelection", c.forceAlgSelection, c.forceAlgSelection == 0 || c.forceAlgSelection == 1, "0 or 1"},
      {"CTAPolicy", c.CTAPolicy,
       undefOr(c.CTAPolicy, (c.CTAPolicy & ~(NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO)) == 0),
       "NCCL_CTA_POLICY_* flags"},
  };
  for (const Check& k : checks)
    if (!k.ok) return fail(ncclInvalidArgument, "%s: config->%s=%d must be %s", caller, k.name, k.value, k.allowed);
  if (c.minCTAs != NCCL_CONFIG_UNDEF_INT && c.maxCTAs != NCCL_CONFIG_UNDEF_INT && c.minCTAs > c.maxCTAs)
    return fail(ncclInvalidArgument, "%s: config->minCTAs=%d exceeds config->maxCTAs=%d", caller, c.minCTAs,
                c.maxCTAs);
  out->algorithmsRequired = c.forceAlgSelection == 1;
  if (c.algSelection && c.algSelection[0]) {
    std::vector<std::string> allowed;
    GYRE_CHECK(parseSelection("ncclCollConfig_t.algSelection", c.algSelection, algorithmNames(), &allowed));
    for (const std::string& name : allowed) out->allowedAlgorithms |= 1u << static_cast<int>(algorithmNamed(name));
  }
  return ncclSuccess;
}

ncclResult_t checkNoAlgorithmChoice(const CallOptions& opts, const char* caller) {
  if (opts.allowedAlgorithms && opts.algorithmsRequired)
    return fail(ncclInvalidUsage,
                "%s: gyre runs this collective as grouped sends and receives and has no algorithm to select; "
                "leave config->algSelection unset or set forceAlgSelection=0", caller);
  return ncclSuccess;
}

}  // namespace gyre
