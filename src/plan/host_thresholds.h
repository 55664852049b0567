// The host planner's size thresholds for the machine it runs on. Each has a
// value measured on one machine (calibration.h); the ones a CPU fact is known
// to move are chosen from this host's CPU (topo::CpuFacts) by the rules in
// host_thresholds.cc, and an environment variable per threshold wins over
// both. Every value carries the reason it was chosen, which gyre-info prints.
//
// Only single-copy thresholds follow the CPU: single copy runs only between
// ranks of one host, which read the same CPU facts, so every rank of a call
// plans the same. Thresholds that also steer multi-host plans stay the
// measured constants unless the environment (the same on every rank) sets them.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "include/gyre.h"
#include "src/plan/calibration.h"
#include "src/topology/cpu_facts.h"

namespace gyre {

// A size no call reaches: the threshold's choice is never taken.
constexpr size_t kNeverBytes = ~size_t{0};

struct HostThresholds {
  size_t singleCopyAllReduceMinBytes = kSingleCopyAllReduceMinBytes;
  size_t singleCopyReduceScatterMinBytes = kSingleCopyReduceScatterMinBytes;
  size_t singleCopyReduceScatterMeshMaxBytes = kSingleCopyReduceScatterMeshMaxBytes;
  size_t singleCopyByValueMinBytes = kSingleCopyByValueMinBytes;
  // Broadcast / AllGather of heap buffers read by reference (process_vm_readv)
  // from this size instead of by value through the FIFO.
  size_t singleCopyByReferenceMinBytes = kNeverBytes;
  size_t twoChannelAllReduceMinBytes = kTwoChannelAllReduceMinBytes;
  size_t minBytesPerChannel = kMinBytesPerChannel;
  size_t doublingMaxBytes = kDoublingMaxBytes;
  size_t oneShotMaxBytesOverDoubling = kOneShotMaxBytesOverDoubling;
  // Not a plan choice: how a host lane stores into the call's output
  // (streaming stores from this size; ranks may differ without harm).
  size_t streamingStoresMinBytes = kStreamingStoresMinBytes;
  static constexpr int kCount = 10;
  std::array<std::string, kCount> why;  // per spec (hostThresholdSpecs order): the fact or setting behind it
};

struct HostThresholdSpec {
  const char* name;  // as gyre-info and docs/CALIBRATION.md print it
  const char* env;   // the variable that overrides it
  size_t HostThresholds::*field;
};

const std::array<HostThresholdSpec, HostThresholds::kCount>& hostThresholdSpecs();

// The thresholds the rules pick for `cpu`, before any environment override.
HostThresholds thresholdsForCpu(const topo::CpuFacts& cpu);

// Replaces every threshold whose variable is set (environment or config file).
// A malformed value is an ncclInvalidArgument naming the variable.
ncclResult_t applyThresholdOverrides(HostThresholds* t);

// This host's thresholds: thresholdsForCpu(hostCpuFacts()) with overrides.
ncclResult_t hostThresholds(HostThresholds* out);

// A host-memory communicator's bytes of buffering per connection when
// NCCL_BUFFSIZE is not set (device communicators keep NCCL's 4 MiB), for a
// rank on a host with `ranksOnHost` ranks of the communicator: the FIFOs of
// its connections compete with the call's buffers for the CPU's caches.
// *why says which fact chose it. Every rank computes this for every rank
// and all take the smallest (src/comm/peer_settings.h), so the two ends of
// a connection agree.
size_t hostFifoBytesForCpu(const topo::CpuFacts& cpu, int ranksOnHost, std::string* why);

// "1 MiB", "never".
std::string thresholdText(size_t bytes);

}  // namespace gyre
