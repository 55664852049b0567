#include "launch.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace gyre_bench {
namespace {

using Clock = std::chrono::steady_clock;

// After one rank fails, the others get this long to notice (the library turns
// a dead peer into an error) before the parent kills them.
constexpr auto kFailureGrace = std::chrono::seconds(30);

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

bool envInt(const char* name, int* out) {
  const char* v = env(name);
  if (!v) return false;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (errno || *end || x < 0 || x > 1 << 30) return false;
  *out = static_cast<int>(x);
  return true;
}

// Ranks on one host talk over loopback unless the user chose an interface.
void defaultToLoopback() { setenv("NCCL_SOCKET_IFNAME", "lo", 0); }

struct Placement {
  int rank = 0, nranks = 1, localRank = 0;
  int localSize = 0;  // ranks on this host; 0 = unknown
  const char* launcher = "none";
  std::string jobKey;  // same string in every rank of one launch, or empty
};

// Reads the placement that mpirun, srun or torchrun exported. Open MPI is
// checked first because mpirun inside a SLURM allocation also inherits the
// SLURM_* variables of the allocation; torchrun next because its RANK is
// per-worker even when torchrun itself was started by srun.
bool discover(Placement* p) {
  if (envInt("OMPI_COMM_WORLD_RANK", &p->rank) && envInt("OMPI_COMM_WORLD_SIZE", &p->nranks)) {
    p->launcher = "openmpi";
    envInt("OMPI_COMM_WORLD_LOCAL_RANK", &p->localRank);
    envInt("OMPI_COMM_WORLD_LOCAL_SIZE", &p->localSize);
    // Open MPI 4 exports the job id to its MCA layer; 5 (PMIx) a namespace.
    if (const char* j = env("OMPI_MCA_ess_base_jobid")) p->jobKey = j;
    else if (const char* ns = env("PMIX_NAMESPACE")) p->jobKey = ns;
  } else if (envInt("RANK", &p->rank) && envInt("WORLD_SIZE", &p->nranks)) {
    p->launcher = "torchrun";
    envInt("LOCAL_RANK", &p->localRank);
    envInt("LOCAL_WORLD_SIZE", &p->localSize);
  } else if (envInt("SLURM_PROCID", &p->rank) && envInt("SLURM_NTASKS", &p->nranks)) {
    p->launcher = "slurm";
    envInt("SLURM_LOCALID", &p->localRank);
    int nodes = 0;
    if ((envInt("SLURM_STEP_NUM_NODES", &nodes) || envInt("SLURM_NNODES", &nodes)) && nodes == 1)
      p->localSize = p->nranks;
    if (const char* job = env("SLURM_JOB_ID"))
      p->jobKey = std::string(job) + "." + (env("SLURM_STEPID") ? env("SLURM_STEPID") : "0");
  } else {
    p->localSize = 1;  // no launcher: a single rank, on this host
  }
  if (p->nranks < 1 || p->rank >= p->nranks) {
    std::fprintf(stderr, "gyre bench: %s placement rank %d of %d is invalid\n", p->launcher,
                 p->rank, p->nranks);
    return false;
  }
  return true;
}

// Port in [20000, 29999] from the launcher's job id, so concurrent jobs on
// one host are unlikely to collide and no rank has to tell the others.
int portFromJobKey(const std::string& key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  return 20000 + static_cast<int>(h % 10000);
}

// Makes every rank's ncclGetUniqueId return the same id, by exporting
// NCCL_COMM_ID (the library derives the id from it and rank 0 hosts the
// rendezvous there). In order of preference:
//  1. NCCL_COMM_ID already set by the user: used as is.
//  2. MASTER_ADDR:MASTER_PORT (torchrun-style). Under torchrun's agent store
//     (TORCHELASTIC_USE_AGENT_STORE=True) the agent itself listens on
//     MASTER_PORT, so MASTER_PORT+1 is used instead.
//  3. mpirun / srun with every rank on this host: 127.0.0.1 and a port hashed
//     from the job id (OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE; SLURM_JOB_ID
//     plus SLURM_STEPID) into 20000-29999.
// Ranks on several hosts with none of these cannot find each other: error.
bool agreeOnCommId(const Placement& p) {
  if (env("NCCL_COMM_ID") || p.nranks == 1) return true;
  const char* addr = env("MASTER_ADDR");
  int port = 0;
  if (addr && envInt("MASTER_PORT", &port)) {
    const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
    if (agent && std::strcmp(agent, "True") == 0) ++port;
    // A bare IPv6 address needs brackets to be told apart from the port.
    bool ipv6 = std::strchr(addr, ':') && addr[0] != '[';
    std::string id;
    id.append(ipv6 ? "[" : "").append(addr).append(ipv6 ? "]:" : ":").append(std::to_string(port));
    setenv("NCCL_COMM_ID", id.c_str(), 1);
    return true;
  }
  if (p.localSize == p.nranks && !p.jobKey.empty()) {
    std::string id = "127.0.0.1:" + std::to_string(portFromJobKey(p.jobKey));
    setenv("NCCL_COMM_ID", id.c_str(), 1);
    return true;
  }
  std::fprintf(stderr,
               "gyre bench: rank %d of %d (%s): cannot agree on a rendezvous address; set "
               "NCCL_COMM_ID=host:port (a host that rank 0 runs on) or MASTER_ADDR and "
               "MASTER_PORT\n",
               p.rank, p.nranks, p.launcher);
  return false;
}

bool makeId(ncclUniqueId* id) {
  ncclResult_t r = ncclGetUniqueId(id);
  if (r == ncclSuccess) return true;
  std::fprintf(stderr, "gyre bench: ncclGetUniqueId failed: %s (%s)\n", ncclGetErrorString(r),
               ncclGetLastError(nullptr));
  return false;
}

int runFromEnvironment(const std::function<int(const RankContext&)>& body) {
  Placement p;
  if (!discover(&p)) return 1;
  if (p.localSize == p.nranks) defaultToLoopback();
  if (!agreeOnCommId(p)) return 1;
  RankContext ctx;
  ctx.rank = p.rank;
  ctx.nranks = p.nranks;
  ctx.localRank = p.localRank;
  ctx.launcher = p.launcher;
  if (!makeId(&ctx.id)) return 1;
  return body(ctx);
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by ") + strsignal(WTERMSIG(status));
  return "stopped";
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Reaps the children, polling so that the deadline is honoured. Returns the
// first failing rank's exit code, or 0.
int waitForRanks(std::vector<pid_t>& pids, int timeoutSeconds) {
  const auto start = Clock::now();
  auto deadline = timeoutSeconds > 0 ? start + std::chrono::seconds(timeoutSeconds)
                                     : Clock::time_point::max();
  int result = 0;
  size_t running = pids.size();
  while (running > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] <= 0) continue;
      int status = 0;
      pid_t r = waitpid(pids[i], &status, WNOHANG);
      if (r == 0) continue;
      pids[i] = 0;
      --running;
      if (r < 0 || exitCodeOf(status) != 0) {
        std::fprintf(stderr, "gyre bench: rank %zu %s\n", i,
                     r < 0 ? "could not be waited for" : describeStatus(status).c_str());
        if (result == 0) result = r < 0 ? 1 : exitCodeOf(status);
        deadline = std::min(deadline, Clock::now() + kFailureGrace);
      }
    }
    if (running == 0) break;
    if (Clock::now() >= deadline) {
      std::fprintf(stderr, "gyre bench: %s after %.0f s; killing ranks:",
                   result ? "ranks still running after a failure" : "timed out",
                   std::chrono::duration<double>(Clock::now() - start).count());
      for (size_t i = 0; i < pids.size(); ++i)
        if (pids[i] > 0) {
          std::fprintf(stderr, " %zu (pid %d)", i, static_cast<int>(pids[i]));
          kill(pids[i], SIGKILL);
        }
      std::fprintf(stderr, "\n");
      for (pid_t& pid : pids)
        if (pid > 0) waitpid(pid, nullptr, 0), pid = 0;
      return result ? result : 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return result;
}

// Forked ranks are placed as mpirun places its ranks by default (Open MPI
// binds each of up to 2 ranks to a core of its own, more to a socket), so
// bench/compare runs gyre and Open MPI on the same placement. Unbound, with
// other jobs on the machine the scheduler could stack both ranks of a
// 2-rank run on one core and keep them there: 7-10 us per small collective,
// the waiting rank spinning while the one it waits for cannot run, against
// 0.3-0.5 us on a core each. GYRE_BENCH_BIND=0 leaves the ranks unbound.
void bindLikeMpirun(int rank, int nranks) {
  const char* env = std::getenv("GYRE_BENCH_BIND");
  if (nranks > 2 || (env && std::strcmp(env, "0") == 0)) return;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < nranks) return;
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || seen++ != rank) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof(one), &one);  // best effort: unbound still runs
    return;
  }
}

// Reads the id the launcher sends down `fd` after every rank is forked, or
// gives up at the deadline (the launcher died or could not make one).
bool receiveId(int fd, ncclUniqueId* id, int timeoutSeconds) {
  const auto deadline = Clock::now() + std::chrono::seconds(timeoutSeconds > 0 ? timeoutSeconds : 600);
  auto* bytes = reinterpret_cast<char*>(id);
  size_t got = 0;
  while (got < sizeof(*id) && Clock::now() < deadline) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    ssize_t n = read(fd, bytes + got, sizeof(*id) - got);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return false;
    if (n > 0) got += static_cast<size_t>(n);
  }
  return got == sizeof(*id);
}

int runForked(const LaunchOptions& options,
              const std::function<int(const RankContext&)>& body) {
  defaultToLoopback();
  RankContext ctx;
  ctx.nranks = options.forkRanks;
  ctx.launcher = "fork";
  // The ranks are forked before the id is made: ncclGetUniqueId starts the
  // rendezvous thread, and a child forked from a process with live gyre threads
  // may not call gyre (POSIX allows it only async-signal-safe calls; gyre
  // answers ncclInvalidUsage). Each rank reads the id from its own socket.
  std::fflush(nullptr);  // or the children would repeat buffered output
  const pid_t parent = getpid();
  std::vector<pid_t> pids;
  std::vector<int> idSockets;
  auto abandon = [&](int code) {
    for (int fd : idSockets) close(fd);
    for (pid_t p : pids) kill(p, SIGKILL);
    for (pid_t p : pids) waitpid(p, nullptr, 0);
    return code;
  };
  for (int i = 0; i < options.forkRanks; ++i) {
    int p[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0) {
      std::fprintf(stderr, "gyre bench: socketpair for rank %d failed: %s\n", i, std::strerror(errno));
      return abandon(1);
    }
    pid_t pid = fork();
    if (pid == 0) {
      // A rank must not outlive the launcher (it would wait on peers forever).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      close(p[1]);
      for (int fd : idSockets) close(fd);
      if (!receiveId(p[0], &ctx.id, options.timeoutSeconds)) _exit(1);
      close(p[0]);
      ctx.rank = i;
      ctx.localRank = i;
      bindLikeMpirun(i, options.forkRanks);
      int rc = body(ctx);
      std::fflush(nullptr);
      _exit(rc);
    }
    close(p[0]);
    if (pid < 0) {
      close(p[1]);
      std::fprintf(stderr, "gyre bench: fork of rank %d failed: %s\n", i, std::strerror(errno));
      return abandon(1);
    }
    pids.push_back(pid);
    idSockets.push_back(p[1]);
  }
  // The id (and, without NCCL_COMM_ID, its rendezvous listener) is made here,
  // in the launcher, which keeps the rendezvous alive while the ranks join it.
  if (!makeId(&ctx.id)) return abandon(1);
  for (size_t i = 0; i < idSockets.size(); ++i) {
    const char* bytes = reinterpret_cast<const char*>(&ctx.id);
    size_t sent = 0;
    while (sent < sizeof(ctx.id)) {
      // MSG_NOSIGNAL: a rank that died before reading must not SIGPIPE the launcher.
      ssize_t n = send(idSockets[i], bytes + sent, sizeof(ctx.id) - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the rank is gone; waitForRanks reports it
      sent += static_cast<size_t>(n);
    }
    close(idSockets[i]);
  }
  return waitForRanks(pids, options.timeoutSeconds);
}

}  // namespace

int launchRanks(const LaunchOptions& options,
                const std::function<int(const RankContext&)>& body) {
  if (options.forkRanks > 0) return runForked(options, body);
  return runFromEnvironment(body);
}

}  // namespace gyre_bench
