// What the 128-byte ncclUniqueId carries: the rendezvous root's address and the
// secret a rank must present to join there (random from ncclGetUniqueId,
// derived from the address and job with NCCL_COMM_ID). Connections after the
// rendezvous prove the root's session secret instead (rendezvous.h).
#pragma once

#include <cstdint>
#include <string>

#include "include/gyre.h"
#include "src/bootstrap/net_address.h"

namespace gyre {

struct UniqueIdContents {
  NetAddress root;
  uint64_t secret = 0;
  // True when the address came from NCCL_COMM_ID: rank 0 hosts the root then.
  bool fixedAddress = false;
  // An id for ncclCommGrow of a host-memory communicator: the new ranks,
  // which have no communicator to ask, make host-memory ones too.
  bool hostGrow = false;
};

void encodeUniqueId(const UniqueIdContents& contents, ncclUniqueId* id);
// Fails with ncclInvalidArgument when the bytes are not a gyre id (bad magic,
// checksum or address): a garbage or corrupted id never reaches the network.
ncclResult_t decodeUniqueId(const ncclUniqueId& id, UniqueIdContents* contents);

// A random 64-bit value from the kernel's entropy pool (never 0).
uint64_t randomSecret();
// FNV-1a, used for checksums and stable hashes of text.
uint64_t fnv1a(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ull);

// The job this process belongs to, as launchers name it: GYRE_JOB_ID,
// SLURM_JOB_ID and SLURM_STEP_ID, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE and
// TORCHELASTIC_RUN_ID, as "NAME=value" pairs of those set ("" if none is).
std::string launcherJobId();

// Builds the id for NCCL_COMM_ID: the same on every process of one job (its
// secret hashes the address and launcherJobId()), so ranks need not exchange
// it. Fails if the variable is set but malformed.
ncclResult_t uniqueIdFromCommIdEnv(bool* used, ncclUniqueId* id);

}  // namespace gyre
