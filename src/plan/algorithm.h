// Algorithm and protocol names and NCCL_ALGO / NCCL_PROTO parsing.
#pragma once

#include <string>
#include <vector>

#include "include/gyre.h"

namespace gyre {

enum class Algorithm { Ring, Tree };
enum class Protocol { Simple, LL };

const char* algorithmName(Algorithm a);
const char* protocolName(Protocol p);

// Parses NCCL's syntax ("Ring,Tree", "^Tree", case-insensitive) against the
// names in `known`, returning the allowed subset in `known` order. An unknown
// name or an empty result is an error naming the variable.
ncclResult_t parseSelection(const char* variable, const std::string& spec, const std::vector<std::string>& known,
                            std::vector<std::string>* allowed);

}  // namespace gyre
