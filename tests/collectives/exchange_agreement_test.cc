// Small AllReduces on 2 and 4 ranks run by recursive doubling: each rank
// reduces the pairs itself. Max and min pick an operand, so their bits must agree on both
// ranks even for +0/-0 and for two NaNs with different payloads. Sum is
// computed in the same operand order too, and a NaN it produces is made the
// one canonical quiet NaN (the compiler may commute an addition, which would
// change whose payload survives), so every bit agrees for sum as well.
#include <cmath>
#include <cstring>

#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

uint32_t bitsOf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
float fromBits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST_CASE("recursive-doubling AllReduce: every rank holds the same bits for ±0 and NaN payloads",
          "[allreduce][doubling]") {
  for (int nranks : {2, 4}) {
    RunConfig config;
    config.nranks = nranks;
    RunResult result = runOnComm(config, [](int rank, int, ncclComm_t comm) {
      // Element i pairs values where max/min may pick either operand's bits.
      const float zeroA = rank % 2 == 0 ? 0.0f : -0.0f;
      const float nanA = fromBits(0x7fc00001u + uint32_t(rank));
      std::vector<float> in = {zeroA, -zeroA, nanA, 1.0f, nanA, 3.0f};
      for (ncclRedOp_t op : {ncclMax, ncclMin, ncclSum}) {
        for (bool inPlace : {false, true}) {
          std::vector<float> out(in.size(), 7.0f), buf = in;
          void* dst = inPlace ? buf.data() : out.data();
          RANK_CHECK(ncclAllReduce(buf.data(), dst, in.size(), ncclFloat32, op, comm, nullptr) == ncclSuccess,
                     "allreduce: %s", lastError().c_str());
          const float* r = static_cast<const float*>(dst);
          std::string bits;
          for (size_t i = 0; i < in.size(); ++i)
            bits += std::to_string(bitsOf(r[i])) + " ";
          rankRecord(std::string(opName(op)) + (inPlace ? " in-place" : " out-of-place"), bits);
          if (op != ncclSum) RANK_CHECK(r[3] == 1.0f && r[5] == 3.0f, "non-NaN operand lost: %g %g", r[3], r[5]);
        }
      }
      return 0;
    });
    checkRun(config, result, 6, /*agreement=*/true);
  }
}
