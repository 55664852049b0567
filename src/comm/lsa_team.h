// A communicator's LSA team: the ranks this rank reaches by plain loads and
// stores (NCCL's "load/store accessible" ranks) — ranks of this process, and
// on device communicators ranks of other processes on this node whose GPU
// is this rank's or one it has peer access to. The team is a run of
// consecutive ranks holding this rank, as NCCL's device API numbers it
// (LSA rank i is world rank base + i).
#pragma once

#include <string>

struct ncclComm;

namespace gyre {

struct LsaTeam {
  int base = 0;
  int size = 1;
  // Why the team is not the whole communicator, naming the first rank this
  // rank cannot reach ("" when it is).
  std::string whyNotWorld;
};

// Needs comm->bootstrap's peer table; asks the CUDA runtime about peer access.
LsaTeam lsaTeamOf(const ncclComm* comm);

}  // namespace gyre
