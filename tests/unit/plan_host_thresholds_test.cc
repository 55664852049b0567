// The host planner's thresholds chosen from the CPU's facts: the rules for an
// Intel Xeon with a large L3, an AMD EPYC and a small-cache machine, what the
// planner then does with them, and environment variables winning over both.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "src/config/env.h"
#include "src/plan/host_thresholds.h"
#include "src/plan/planner.h"
#include "tests/unit/plan_fixtures.h"

using namespace gyre;
using gyre::testing::hostContext;
using gyre::testing::planFloats;

namespace {

topo::CpuFacts intelXeon() {  // a 2-vCPU Xeon VM as /proc/cpuinfo and sysfs show it
  topo::CpuFacts f;
  f.vendor = topo::CpuVendor::Intel;
  f.family = 6;
  f.model = 207;
  f.l2Bytes = 2 << 20;
  f.l3Bytes = size_t{260} << 20;
  f.cores = 2;
  f.numaNodes = 1;
  return f;
}

topo::CpuFacts amdEpyc() {
  topo::CpuFacts f;
  f.vendor = topo::CpuVendor::Amd;
  f.family = 25;
  f.model = 1;
  f.l2Bytes = 512 << 10;
  f.l3Bytes = 32 << 20;
  f.cores = 2;
  f.numaNodes = 1;
  return f;
}

topo::CpuFacts smallCache() {  // an embedded core: 128 KiB L2, no L3, vendor unknown
  topo::CpuFacts f;
  f.l2Bytes = 128 << 10;
  f.cores = 4;
  return f;
}

int indexOf(const char* env) {
  for (int i = 0; i < HostThresholds::kCount; ++i)
    if (std::string(hostThresholdSpecs()[i].env) == env) return i;
  FAIL("no threshold with variable " << env);
  return 0;
}

size_t valueOf(const HostThresholds& t, const char* env) { return t.*hostThresholdSpecs()[indexOf(env)].field; }
const std::string& whyOf(const HostThresholds& t, const char* env) { return t.why[indexOf(env)]; }

constexpr const char* kMesh = "GYRE_SINGLE_COPY_MESH_MAX_BYTES";
constexpr const char* kReference = "GYRE_SINGLE_COPY_REFERENCE_MIN_BYTES";

// Clears every threshold variable on construction and destruction.
struct CleanEnv {
  CleanEnv() { clear(); }
  ~CleanEnv() { clear(); }
  static void clear() {
    for (const auto& s : hostThresholdSpecs()) unsetenv(s.env);
    env::reloadForTesting("/nonexistent");
  }
};



}  // namespace

TEST_CASE("an AMD EPYC keeps the thresholds measured on it: mesh ReduceScatter up to 2 MiB, heap buffers never by "
          "process_vm_readv") {
  HostThresholds t = thresholdsForCpu(amdEpyc());
  CHECK(t.singleCopyReduceScatterMeshMaxBytes == (2u << 20));
  CHECK(t.singleCopyByReferenceMinBytes == kNeverBytes);
  CHECK(t.singleCopyByValueMinBytes == kSingleCopyByValueMinBytes);
  CHECK(t.singleCopyAllReduceMinBytes == kSingleCopyAllReduceMinBytes);
  CHECK(t.doublingMaxBytes == kDoublingMaxBytes);
  CHECK(t.minBytesPerChannel == kMinBytesPerChannel);
  CHECK(whyOf(t, kMesh).find("L2 of 512 KiB") != std::string::npos);
  CHECK(whyOf(t, kReference).find("AMD") != std::string::npos);
}

TEST_CASE("an Intel Xeon with a large L3 reads heap Broadcast/AllGather buffers by process_vm_readv from 64 KiB "
          "and runs mesh ReduceScatter single copy up to 4 L2s (8 MiB)") {
  HostThresholds t = thresholdsForCpu(intelXeon());
  CHECK(t.singleCopyByReferenceMinBytes == (64u << 10));
  CHECK(t.singleCopyReduceScatterMeshMaxBytes == (8u << 20));
  CHECK(whyOf(t, kReference).find("Intel") != std::string::npos);
  // Intel's L2 of 4 MiB would give 16 MiB: clamped to 8 MiB.
  topo::CpuFacts bigL2 = intelXeon();
  bigL2.l2Bytes = 4 << 20;
  HostThresholds c = thresholdsForCpu(bigL2);
  CHECK(c.singleCopyReduceScatterMeshMaxBytes == (8u << 20));
  CHECK(whyOf(c, kMesh).find("clamped") != std::string::npos);
}

TEST_CASE("a small-cache machine of unknown vendor stops mesh ReduceScatter at 512 KiB and never reads heap "
          "buffers by reference; an unknown L2 keeps the measured 2 MiB") {
  HostThresholds t = thresholdsForCpu(smallCache());
  CHECK(t.singleCopyReduceScatterMeshMaxBytes == (512u << 10));
  CHECK(t.singleCopyByReferenceMinBytes == kNeverBytes);
  HostThresholds unknown = thresholdsForCpu(topo::CpuFacts{});
  CHECK(unknown.singleCopyReduceScatterMeshMaxBytes == kSingleCopyReduceScatterMeshMaxBytes);
  CHECK(whyOf(unknown, kMesh).find("unknown") != std::string::npos);
}

TEST_CASE("the planner follows the CPU's thresholds: Intel reads 2-rank AllGather by reference from 64 KiB and "
          "runs 4-rank ReduceScatter of 4 MiB single copy, AMD does neither") {
  TuningTable intel, amd;
  intel.host = thresholdsForCpu(intelXeon());
  amd.host = thresholdsForCpu(amdEpyc());
  for (CollKind coll : {CollKind::AllGather, CollKind::Broadcast}) {
    INFO(collName(coll));
    Plan small = planFloats(hostContext(2, intel, true), coll, 32 << 10);
    CHECK(small.singleCopy);
    CHECK(small.singleCopyByValue);
    Plan large = planFloats(hostContext(2, intel, true), coll, 64 << 10);
    CHECK(large.singleCopy);
    CHECK_FALSE(large.singleCopyByValue);
    CHECK(planFloats(hostContext(2, amd, true), coll, 64 << 20).singleCopyByValue);
  }
  CHECK(planFloats(hostContext(4, intel, true), CollKind::ReduceScatter, 4 << 20).singleCopy);
  CHECK_FALSE(planFloats(hostContext(4, intel, true), CollKind::ReduceScatter, 16 << 20).singleCopy);
  CHECK_FALSE(planFloats(hostContext(4, amd, true), CollKind::ReduceScatter, 4 << 20).singleCopy);
}

TEST_CASE("streaming stores into the output start at half the L3: 16 MiB on the AMD EPYC, clamped to 64 MiB on "
          "the Intel Xeon's 260 MiB, the measured 16 MiB where no L3 is known") {
  constexpr const char* kStreaming = "GYRE_STREAMING_STORES_MIN_BYTES";
  HostThresholds amd = thresholdsForCpu(amdEpyc());
  CHECK(amd.streamingStoresMinBytes == (16u << 20));
  CHECK(whyOf(amd, kStreaming).find("half the L3 of 32 MiB") != std::string::npos);
  HostThresholds intel = thresholdsForCpu(intelXeon());
  CHECK(intel.streamingStoresMinBytes == (64u << 20));
  CHECK(whyOf(intel, kStreaming).find("clamped") != std::string::npos);
  topo::CpuFacts smallL3 = amdEpyc();
  smallL3.l3Bytes = 4 << 20;
  CHECK(thresholdsForCpu(smallL3).streamingStoresMinBytes == (4u << 20));  // the floor, not 2 MiB
  HostThresholds none = thresholdsForCpu(smallCache());
  CHECK(none.streamingStoresMinBytes == kStreamingStoresMinBytes);
  CHECK(whyOf(none, kStreaming).find("unknown") != std::string::npos);
}

TEST_CASE("with 3+ ranks on a host a host communicator's FIFO is two L2s within 1..4 MiB: 1 MiB on the AMD "
          "EPYC, 4 MiB on the Intel Xeon, the floor on a small cache; a pair or an unknown L2 keeps NCCL's 4 MiB") {
  std::string why;
  CHECK(hostFifoBytesForCpu(amdEpyc(), 4, &why) == (1u << 20));
  CHECK(why == "2 x L2 of 512 KiB a core (3+ ranks on the host)");
  CHECK(hostFifoBytesForCpu(amdEpyc(), 2, &why) == (4u << 20));
  CHECK(why.find("at most 2 ranks") != std::string::npos);
  CHECK(hostFifoBytesForCpu(amdEpyc(), 1, nullptr) == (4u << 20));
  CHECK(hostFifoBytesForCpu(intelXeon(), 3, &why) == (4u << 20));
  CHECK(hostFifoBytesForCpu(smallCache(), 8, &why) == (1u << 20));
  CHECK(why.find("clamped to 1 MiB..4 MiB") != std::string::npos);
  topo::CpuFacts iceLake = intelXeon();
  iceLake.l2Bytes = 1280 << 10;  // 2.5 MiB: whole 64 KiB granules, so every slot is whole pages
  CHECK(hostFifoBytesForCpu(iceLake, 4, nullptr) == (2560u << 10));
  CHECK((hostFifoBytesForCpu(iceLake, 4, nullptr) / 8) % 4096 == 0);
  topo::CpuFacts unknown;
  CHECK(hostFifoBytesForCpu(unknown, 4, &why) == (4u << 20));
  CHECK(why.find("unknown") != std::string::npos);
}

TEST_CASE("environment variables win over the CPU's thresholds and say so; a malformed one fails naming it") {
  CleanEnv clean;
  setenv("GYRE_SINGLE_COPY_MESH_MAX_BYTES", "3M", 1);
  setenv("GYRE_SINGLE_COPY_REFERENCE_MIN_BYTES", "256K", 1);
  setenv("GYRE_DOUBLING_MAX_BYTES", "16K", 1);
  setenv("GYRE_SINGLE_COPY_MIN_BYTES", "never", 1);
  env::reloadForTesting("/nonexistent");
  HostThresholds t = thresholdsForCpu(amdEpyc());
  REQUIRE(applyThresholdOverrides(&t) == ncclSuccess);
  CHECK(valueOf(t, "GYRE_SINGLE_COPY_MESH_MAX_BYTES") == (3u << 20));
  CHECK(valueOf(t, "GYRE_SINGLE_COPY_REFERENCE_MIN_BYTES") == (256u << 10));
  CHECK(valueOf(t, "GYRE_DOUBLING_MAX_BYTES") == (16u << 10));
  CHECK(valueOf(t, "GYRE_SINGLE_COPY_MIN_BYTES") == kNeverBytes);
  CHECK(valueOf(t, "GYRE_SINGLE_COPY_ALLREDUCE_MIN_BYTES") == kSingleCopyAllReduceMinBytes);  // not set: the rule's
  CHECK(whyOf(t, kMesh) == "GYRE_SINGLE_COPY_MESH_MAX_BYTES=3M (environment)");
  TuningTable table;
  table.host = t;
  CHECK_FALSE(planFloats(hostContext(2, table, true), CollKind::AllGather, 256 << 10).singleCopy);  // single copy never
  CHECK_FALSE(planFloats(hostContext(2, table, true), CollKind::AllReduce, 32 << 10).doubling);  // past 16 KiB: the ring

  setenv("GYRE_TWO_CHANNEL_MIN_BYTES", "lots", 1);
  env::reloadForTesting("/nonexistent");
  HostThresholds bad = thresholdsForCpu(amdEpyc());
  CHECK(applyThresholdOverrides(&bad) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("GYRE_TWO_CHANNEL_MIN_BYTES") != std::string::npos);
}

TEST_CASE("CPU facts parse from /proc/cpuinfo's first processor and sysfs cache sizes") {
  topo::CpuFacts f;
  topo::parseCpuInfo("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"
                     "model name\t: Intel(R) Xeon(R) Platinum 8581C CPU @ 2.10GHz\n\nprocessor\t: 1\n"
                     "vendor_id\t: AuthenticAMD\n",
                     &f);
  CHECK(f.vendor == topo::CpuVendor::Intel);
  CHECK(f.family == 6);
  CHECK(f.model == 207);
  CHECK(f.modelName == "Intel(R) Xeon(R) Platinum 8581C CPU @ 2.10GHz");
  CHECK(topo::parseCacheSize("512K") == (512u << 10));
  CHECK(topo::parseCacheSize("32768K") == (32u << 20));
  CHECK(topo::parseCacheSize("2M") == (2u << 20));
  CHECK(topo::parseCacheSize("") == 0);
  CHECK(topo::parseCacheSize("big") == 0);
}
