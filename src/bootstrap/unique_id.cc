#include "src/bootstrap/unique_id.h"

#include <sys/random.h>

#include <cstdlib>
#include <cstring>
#include <ctime>

#include "src/config/env.h"
#include "src/debug/error.h"

namespace gyre {
namespace {

constexpr char kMagic[8] = {'G', 'Y', 'R', 'E', 'U', 'I', 'D', 1};
constexpr uint32_t kFlagFixedAddress = 1;
constexpr uint32_t kFlagHostGrow = 2;

// Byte layout inside ncclUniqueId::internal. The checksum covers every other
// byte, so random or truncated ids are rejected before any connection is made.
struct IdLayout {
  char magic[8];
  uint64_t secret;
  WireAddress root;
  uint32_t flags;
  uint32_t checksum;
  char zero[NCCL_UNIQUE_ID_BYTES - 48];
};
static_assert(sizeof(IdLayout) == NCCL_UNIQUE_ID_BYTES);

uint32_t checksumOf(IdLayout layout) {
  layout.checksum = 0;
  return static_cast<uint32_t>(fnv1a(&layout, sizeof(layout)));
}

}  // namespace

uint64_t fnv1a(const void* data, size_t bytes, uint64_t seed) {
  uint64_t h = seed;
  auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t randomSecret() {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = fnv1a(&v, sizeof(v), static_cast<uint64_t>(clock()));
  }
  return v;
}

void encodeUniqueId(const UniqueIdContents& c, ncclUniqueId* id) {
  IdLayout layout{};
  memcpy(layout.magic, kMagic, sizeof(kMagic));
  layout.secret = c.secret;
  layout.root = c.root.toWire();
  layout.flags = (c.fixedAddress ? kFlagFixedAddress : 0) | (c.hostGrow ? kFlagHostGrow : 0);
  layout.checksum = checksumOf(layout);
  memcpy(id->internal, &layout, sizeof(layout));
}

ncclResult_t decodeUniqueId(const ncclUniqueId& id, UniqueIdContents* c) {
  IdLayout layout;
  memcpy(&layout, id.internal, sizeof(layout));
  if (memcmp(layout.magic, kMagic, sizeof(kMagic)) != 0)
    return fail(ncclInvalidArgument,
                "the unique id is not a gyre unique id (bad magic); pass the id made by ncclGetUniqueId "
                "unchanged to every rank");
  if (layout.checksum != checksumOf(layout))
    return fail(ncclInvalidArgument, "the unique id is corrupted (checksum mismatch)");
  c->root = NetAddress::fromWire(layout.root);
  if (!c->root.valid() || c->root.port() == 0)
    return fail(ncclInvalidArgument, "the unique id holds no valid root address");
  c->secret = layout.secret;
  c->fixedAddress = (layout.flags & kFlagFixedAddress) != 0;
  c->hostGrow = (layout.flags & kFlagHostGrow) != 0;
  return ncclSuccess;
}

std::string launcherJobId() {
  // Values every process of one job sees alike. Restart counters are left out:
  // torchelastic agents that join late count differently from the others.
  static const char* const kLauncherVars[] = {"SLURM_JOB_ID", "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid",
                                              "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID"};
  std::string out;
  std::string own = env::getString("GYRE_JOB_ID");
  if (!own.empty()) out = "GYRE_JOB_ID=" + own;
  for (const char* name : kLauncherVars) {
    const char* v = getenv(name);
    if (!v || !*v) continue;
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += v;
  }
  return out;
}

ncclResult_t uniqueIdFromCommIdEnv(bool* used, ncclUniqueId* id) {
  std::string text = env::getString("NCCL_COMM_ID");
  *used = !text.empty();
  if (!*used) return ncclSuccess;
  UniqueIdContents c;
  std::string why;
  if (!NetAddress::parse(text, &c.root, &why))
    return fail(ncclInvalidArgument, "NCCL_COMM_ID=\"%s\" is not valid: %s", text.c_str(), why.c_str());
  // Every process derives the same secret from the address and the job id:
  // ranks of one job agree without exchanging anything, and a stale rank of an
  // earlier job at the same address is refused by the rendezvous whenever a
  // launcher (or GYRE_JOB_ID) tells the jobs apart. The root then hands out a
  // random session secret, so later connections never rest on this one.
  std::string seed = "gyre-fixed-root:" + c.root.toString() + "|job:" + launcherJobId();
  c.secret = fnv1a(seed.data(), seed.size()) | 1;
  c.fixedAddress = true;
  encodeUniqueId(c, id);
  return ncclSuccess;
}

}  // namespace gyre
