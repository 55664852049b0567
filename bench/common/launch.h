// Starting the ranks of a benchmark and agreeing on a unique id, without MPI.
//
// Two ways to get ranks:
//  * -p N: this process makes the unique id, forks N children (rank i = child
//    i) and waits for them; the children inherit the id and the rendezvous
//    listener that ncclGetUniqueId started in the parent.
//  * otherwise: one rank per process, placed by a standard launcher's
//    environment (mpirun, srun, torchrun); see launch.cc for how the ranks
//    agree on a rendezvous address. With no launcher it is a single rank.
#pragma once

#include <functional>

#include "gyre.h"

namespace gyre_bench {

struct RankContext {
  int rank = 0;
  int nranks = 1;
  int localRank = 0;
  const char* launcher = "none";  // "fork", "openmpi", "slurm", "torchrun", "none"
  ncclUniqueId id{};
};

struct LaunchOptions {
  int forkRanks = 0;       // -p N; 0 = take the ranks from the environment
  int timeoutSeconds = 0;  // fork mode: kill all ranks after this long; 0 = never
};

// Runs `body` once per rank (in forked children, or in this process) and
// returns the exit code for this process: 0 when every rank returned 0.
int launchRanks(const LaunchOptions& options, const std::function<int(const RankContext&)>& body);

}  // namespace gyre_bench
