// Per-collective configuration (ncclCollConfig_t, the nccl*Config entry
// points): reading and checking the struct, and what of it a call carries.
#pragma once

#include "include/gyre.h"
#include "src/call/call.h"

namespace gyre {

// What a per-call config asks of one call.
struct CallOptions {
  unsigned char allowedAlgorithms = 0;  // bits 1 << int(Algorithm); 0: the tuning table chooses
  bool algorithmsRequired = true;       // forceAlgSelection
};

// Reads `config` (NULL: the defaults). A config not made with
// NCCL_COLLCONFIG_INITIALIZER (magic, version, size), an out-of-range field
// or an algSelection naming no algorithm of gyre's is an ncclInvalidArgument
// naming the field; the CTA fields and vendor extensions are accepted and
// have no effect (gyre's executors do not size themselves in CTAs).
ncclResult_t readCollConfig(const ncclCollConfig_t* config, const char* caller, CallOptions* out);

// For the collectives gyre runs as grouped sends and receives (AlltoAll,
// Gather, Scatter): they have no algorithm to select, so a required
// selection is refused and an optional one ignored.
ncclResult_t checkNoAlgorithmChoice(const CallOptions& opts, const char* caller);

inline CollCall withOptions(const CallOptions& opts, CollKind coll, const void* input, void* output, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, int root, bool isSend, cudaStream_t stream) {
  CollCall c = makeCall(coll, input, output, count, datatype, op, root, isSend, stream);
  c.allowedAlgorithms = opts.allowedAlgorithms;
  c.algorithmsRequired = opts.algorithmsRequired;
  return c;
}

}  // namespace gyre
