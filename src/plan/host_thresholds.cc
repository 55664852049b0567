#include "src/plan/host_thresholds.h"

#include <algorithm>
#include <utility>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/plan/tuning.h"

namespace gyre {
namespace {

constexpr const char* kMeasuredHere =
    "measured on the 2-vCPU AMD EPYC VM (calibration.h); no CPU fact is known to move it";

// The ReduceScatter mesh's n-1 FIFOs per rank stop paying where they outgrow
// a core's private cache: on the AMD EPYC VM (512 KiB L2 a core) 4 ranks by
// value were 1.4-1.5x the ring up to 1 MiB and 0.74-0.87x from 4 MiB, so
// the cut sits at 4 L2s; other L2 sizes scale it, within what was measured
// to stay sane on either side.
constexpr size_t kMeshMaxPerL2 = 4;
constexpr size_t kMeshMaxFloor = 512 << 10;
constexpr size_t kMeshMaxCeiling = 8 << 20;

// Heap Broadcast / AllGather buffers by reference (process_vm_readv) from
// this size on Intel. On the AMD EPYC VM the kernel's copy lost to the FIFO
// at every size (docs/CALIBRATION.md, bench/host/path_costs), so there it
// stays never. On the Intel Xeon VM process_vm_readv copies at 8-16 GB/s
// against two FIFO copies: read by reference from 64 KiB, 2-rank AllGather
// ran 1.4-2.2x and Broadcast 1.4-2x the FIFO path at 64-512 KiB (below
// 64 KiB no faster), which is where gyre had trailed Open MPI's CMA reads.
constexpr size_t kIntelByReferenceMinBytes = 64 << 10;

// Streaming stores into a call's output pay once the call's buffers no
// longer fit the last-level cache, where a plain store first reads the line
// from memory: on the AMD EPYC VM (32 MiB L3) 2-rank AllGather was
// 1.2-1.3x faster with them at 16-64 MiB out of place and 0.75-0.9x at
// 1-4 MiB, where output, input and FIFOs still fit. Half the L3, kept
// within what stays sane on either side.
constexpr size_t kStreamingFloor = 4 << 20;
constexpr size_t kStreamingCeiling = 64 << 20;

// A host connection's FIFO (8 slots) is written by one core and read by
// another, call after call; with 3+ ranks on a host each rank drives
// several connections at once (two ring channels, the mesh), and their
// FIFOs crowd the call's buffers out of the caches. On the AMD EPYC VM (512
// KiB L2 a core, 32 MiB L3), 4 ranks on 1 MiB FIFOs against NCCL's 4 MiB:
// AllReduce 1.2-1.6x faster at 2-32 MiB, Broadcast 1.1-1.9x at 512 KiB-32
// MiB, ReduceScatter 1.1-1.4x at 2-32 MiB, AllGather with no consistent
// side; 256 and 512 KiB slowed AllGather by up to 2.5x (more steps, each a
// wait between oversubscribed ranks). Two ranks showed no clear
// side (AllGather 1.3x faster at 8 MiB, in-place Broadcast 0.5x), so a
// pair keeps NCCL's default. Two L2s for 3+ ranks, within those bounds; an
// unknown L2 keeps NCCL's default.
constexpr size_t kHostFifoPerL2 = 2;
constexpr size_t kHostFifoFloor = 1 << 20;
constexpr size_t kHostFifoCeiling = 4 << 20;
constexpr size_t kHostFifoGranule = 64 << 10;  // slots stay whole pages

// `value` kept within [floor, ceiling]; *why is `rule`, and says so where
// the bounds moved it.
size_t withinBounds(size_t value, size_t floor, size_t ceiling, std::string rule, std::string* why) {
  const size_t kept = std::clamp(value, floor, ceiling);
  *why = std::move(rule);
  if (kept != value) *why += ", clamped to " + thresholdText(floor) + ".." + thresholdText(ceiling);
  return kept;
}

}  // namespace

std::string thresholdText(size_t bytes) { return bytes == kNeverBytes ? "never" : sizeText(bytes); }

const std::array<HostThresholdSpec, HostThresholds::kCount>& hostThresholdSpecs() {
  static const std::array<HostThresholdSpec, HostThresholds::kCount> specs = {{
      {"single-copy AllReduce from (2 ranks)", "GYRE_SINGLE_COPY_ALLREDUCE_MIN_BYTES",
       &HostThresholds::singleCopyAllReduceMinBytes},
      {"single-copy ReduceScatter from", "GYRE_SINGLE_COPY_REDUCE_SCATTER_MIN_BYTES",
       &HostThresholds::singleCopyReduceScatterMinBytes},
      {"single-copy ReduceScatter on 3..8 ranks up to", "GYRE_SINGLE_COPY_MESH_MAX_BYTES",
       &HostThresholds::singleCopyReduceScatterMeshMaxBytes},
      {"single-copy Broadcast/AllGather from", "GYRE_SINGLE_COPY_MIN_BYTES",
       &HostThresholds::singleCopyByValueMinBytes},
      {"heap Broadcast/AllGather by process_vm_readv from", "GYRE_SINGLE_COPY_REFERENCE_MIN_BYTES",
       &HostThresholds::singleCopyByReferenceMinBytes},
      {"3+ ranks: two AllReduce channels from", "GYRE_TWO_CHANNEL_MIN_BYTES",
       &HostThresholds::twoChannelAllReduceMinBytes},
      {"host rings: bytes per channel", "GYRE_CHANNEL_MIN_BYTES", &HostThresholds::minBytesPerChannel},
      {"recursive doubling AllReduce up to", "GYRE_DOUBLING_MAX_BYTES", &HostThresholds::doublingMaxBytes},
      {"one-shot over doubling (4, 8 ranks) up to", "GYRE_ONE_SHOT_MAX_BYTES",
       &HostThresholds::oneShotMaxBytesOverDoubling},
      {"streaming stores into the output from", "GYRE_STREAMING_STORES_MIN_BYTES",
       &HostThresholds::streamingStoresMinBytes},
  }};
  return specs;
}

HostThresholds thresholdsForCpu(const topo::CpuFacts& cpu) {
  HostThresholds t;
  const auto& specs = hostThresholdSpecs();
  for (int i = 0; i < HostThresholds::kCount; ++i) t.why[i] = kMeasuredHere;
  auto index = [&](size_t HostThresholds::*field) {
    for (int i = 0; i < HostThresholds::kCount; ++i)
      if (specs[i].field == field) return i;
    return 0;
  };
  const std::string vendor = topo::cpuVendorName(cpu.vendor);
  t.why[index(&HostThresholds::minBytesPerChannel)] =
      "not fitted (calibration.h); 2 host ranks over shared memory keep one channel";

  const int mesh = index(&HostThresholds::singleCopyReduceScatterMeshMaxBytes);
  if (cpu.l2Bytes > 0) {
    t.singleCopyReduceScatterMeshMaxBytes =
        withinBounds(kMeshMaxPerL2 * cpu.l2Bytes, kMeshMaxFloor, kMeshMaxCeiling,
                     "4 x L2 of " + thresholdText(cpu.l2Bytes) + " a core (n-1 FIFOs a rank outgrow it)", &t.why[mesh]);
  } else {
    t.why[mesh] = "L2 size unknown: the value measured on the AMD EPYC VM (512 KiB L2)";
  }

  const int streaming = index(&HostThresholds::streamingStoresMinBytes);
  if (cpu.l3Bytes > 0) {
    t.streamingStoresMinBytes =
        withinBounds(cpu.l3Bytes / 2, kStreamingFloor, kStreamingCeiling,
                     "half the L3 of " + thresholdText(cpu.l3Bytes) + " (the call's buffers outgrow it)",
                     &t.why[streaming]);
  } else {
    t.why[streaming] = "L3 size unknown: the value measured on the AMD EPYC VM (32 MiB L3)";
  }

  const int ref = index(&HostThresholds::singleCopyByReferenceMinBytes);
  if (cpu.vendor == topo::CpuVendor::Intel) {
    t.singleCopyByReferenceMinBytes = kIntelByReferenceMinBytes;
    t.why[ref] = "Intel: on an Intel Xeon VM reading by process_vm_readv from 64 KiB ran 2-rank AllGather 1.4-2.2x "
                 "and Broadcast 1.4-2x faster than the FIFO at 64-512 KiB (measured with gyre)";
  } else {
    t.singleCopyByReferenceMinBytes = kNeverBytes;
    t.why[ref] = vendor + ": the FIFO beat process_vm_readv at every size on the AMD EPYC VM";
  }
  return t;
}

size_t hostFifoBytesForCpu(const topo::CpuFacts& cpu, int ranksOnHost, std::string* why) {
  std::string reason;
  size_t bytes = kHostFifoCeiling;
  if (ranksOnHost <= 2) {
    reason = "NCCL's default: at most 2 ranks on the host";
  } else if (cpu.l2Bytes > 0) {
    bytes = withinBounds(kHostFifoPerL2 * cpu.l2Bytes / kHostFifoGranule * kHostFifoGranule, kHostFifoFloor,
                         kHostFifoCeiling, "2 x L2 of " + thresholdText(cpu.l2Bytes) + " a core (3+ ranks on the host)",
                         &reason);
  } else {
    reason = "L2 size unknown: NCCL's default";
  }
  if (why) *why = std::move(reason);
  return bytes;
}

ncclResult_t applyThresholdOverrides(HostThresholds* t) {
  for (int i = 0; i < HostThresholds::kCount; ++i) {
    const HostThresholdSpec& s = hostThresholdSpecs()[i];
    env::Setting set = env::lookup(s.env);
    if (!env::isSet(set)) continue;
    int64_t v = 0;
    if (set.value == "never") v = -1;
    else if (!env::parseBytes(set.value, &v) || v < 0)
      return fail(ncclInvalidArgument, "%s=%s (%s): not a byte count (bytes, with a K, M or G suffix, or never)", s.env,
                  set.value.c_str(), env::originOf(set).c_str());
    t->*s.field = v < 0 ? kNeverBytes : static_cast<size_t>(v);
    t->why[i] = std::string(s.env) + "=" + set.value + " (" + env::originOf(set) + ")";
  }
  return ncclSuccess;
}

ncclResult_t hostThresholds(HostThresholds* out) {
  *out = thresholdsForCpu(topo::hostCpuFacts());
  return applyThresholdOverrides(out);
}

}  // namespace gyre
