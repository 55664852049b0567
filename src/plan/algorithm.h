// Algorithm and protocol names and NCCL_ALGO / NCCL_PROTO parsing.
#pragma once

#include <string>
#include <vector>

#include "include/gyre.h"

namespace gyre {

// Direct: every rank talks to every other rank over the mesh connections
// (host communicators on one host): a broadcast's root sends to each rank, an
// all-gather's ranks send their block to each rank, so a call takes one
// dependent hop instead of n-1 (latency-optimal for small messages).
enum class Algorithm { Ring, Tree, Direct };
enum class Protocol { Simple, LL };

const char* algorithmName(Algorithm a);
const char* protocolName(Protocol p);
// The NCCL_ALGO names gyre knows, and the algorithm of one (as algorithmName spells it).
const std::vector<std::string>& algorithmNames();
Algorithm algorithmNamed(const std::string& name);

// Parses NCCL's syntax ("Ring,Tree", "^Tree", case-insensitive) against the
// names in `known`, returning the allowed subset in `known` order. An unknown
// name or an empty result is an error naming the variable.
ncclResult_t parseSelection(const char* variable, const std::string& spec, const std::vector<std::string>& known,
                            std::vector<std::string>* allowed);

}  // namespace gyre
