// Whether this communicator's ranks may read each other's buffers with
// process_vm_readv (Linux cross-memory attach): one copy from the owner's
// buffer into the reader's instead of two through a shared-memory FIFO. The
// kernel allows it between processes of one user unless
// /proc/sys/kernel/yama/ptrace_scope (or a seccomp filter, or a container
// without CAP_SYS_PTRACE across user namespaces) forbids it, so every rank
// tries it once on its ring neighbour and all ranks take the answer of the
// worst: a schedule is planned alike on every rank.
#include "src/comm/single_copy.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/plan/cost_model.h"

namespace gyre {
namespace {

struct ProbeFacts {
  uint64_t address;  // of a word holding `value` in this process
  uint64_t value;
  int32_t error;     // errno of this rank's read of its neighbour (0: it worked)
  int32_t pad;
};

// Why the transfers stay two-copy, or nullptr when a probe can decide.
const char* ruledOut(ncclComm* comm) {
  if (env::getString("GYRE_SINGLE_COPY") == "off") return "GYRE_SINGLE_COPY=off";
  // Where the single-copy schedules have no connections, nothing to say.
  if (!comm->isHost || comm->nranks < 2 || comm->nranks > kMeshMaxRanks) return "";
  if (comm->topology->rings.nhosts != 1) return "";
  if (!comm->shmRings) return "the ranks talk over sockets (NCCL_SHM_DISABLE)";
  if (comm->nranks > 2 && comm->mesh.send.empty()) return "";
  return nullptr;
}

}  // namespace

ncclResult_t probeSingleCopy(ncclComm* comm, const Deadline& deadline) {
  comm->singleCopy = false;
  if (const char* why = ruledOut(comm)) {
    if (*why && comm->rank == 0) GYRE_INFO("INIT", "single-copy transfers off: %s", why);
    return ncclSuccess;
  }
  int n = comm->nranks;
  // The word the next rank reads, distinct per rank (the pid and the rank).
  // One per call, on this thread's stack, where it lives until every rank
  // has read (the second gather): communicators that ncclCommInitAll makes
  // in one process probe at once and must not overwrite each other's.
  uint64_t probeWord = (static_cast<uint64_t>(getpid()) << 32) | static_cast<uint32_t>(comm->rank);
  std::vector<ProbeFacts> facts(n);
  facts[comm->rank] = {reinterpret_cast<uint64_t>(&probeWord), probeWord, 0, 0};
  GYRE_CHECK(comm->bootstrap->allGather(facts.data(), sizeof(ProbeFacts), deadline, &comm->abortFlag));
  int next = (comm->rank + 1) % n;
  uint64_t seen = 0;
  iovec local{&seen, sizeof(seen)};
  iovec remote{reinterpret_cast<void*>(facts[next].address), sizeof(seen)};
  ssize_t got = process_vm_readv(comm->bootstrap->peers()[next].pid, &local, 1, &remote, 1, 0);
  int error = got == static_cast<ssize_t>(sizeof(seen)) ? (seen == facts[next].value ? 0 : EIO) : errno;
  facts.assign(n, ProbeFacts{});
  facts[comm->rank].error = error;
  GYRE_CHECK(comm->bootstrap->allGather(facts.data(), sizeof(ProbeFacts), deadline, &comm->abortFlag));
  for (int r = 0; r < n; ++r)
    if (facts[r].error) {
      if (comm->rank == 0)
        GYRE_INFO("INIT", "single-copy transfers off: process_vm_readv by rank %d from rank %d failed: %s%s", r,
                  (r + 1) % n, strerror(facts[r].error),
                  facts[r].error == EPERM ? " (see /proc/sys/kernel/yama/ptrace_scope)" : "");
      return ncclSuccess;
    }
  comm->singleCopy = true;
  comm->singleCopyAlways = env::getString("GYRE_SINGLE_COPY") == "always";
  if (comm->rank == 0) GYRE_INFO("INIT", "single-copy transfers on: process_vm_readv between the %d ranks", n);
  return ncclSuccess;
}

}  // namespace gyre
