// ncclRedOpCreatePreMulSum operators in AllReduce (ring and tree), Reduce and
// ReduceScatter over all twelve datatypes, with each rank's own scalar given either as
// ncclScalarHostImmediate (copied when the op is made) or ncclScalarDevice (on a host
// communicator: the caller's memory, read when each call starts). Results are checked
// against reference.h's PreMulSum reference: Σ_r scalar_r·input_r, exact modulo 2^bits
// for integers, within a tolerance from the type's epsilon and the rank count for floats.
#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

enum class Coll { kAllReduce, kReduce, kReduceScatter };

const char* collName(Coll c) {
  return c == Coll::kAllReduce ? "allreduce" : c == Coll::kReduce ? "reduce" : "reducescatter";
}

// Scalar of `rank` in case `id`, one element of the type. Integers use all their bits,
// so products wrap; floats come from a set every format here holds exactly.
void makeScalar(const TypeInfo& t, uint64_t id, int rank, void* out) {
  static const long double kFloatScalars[] = {0.5L, 1.5L, -2, 0.75L, 1.25L, -0.5L, 3, -1, 1};
  uint64_t state = inputSeed(id ^ 0x5ca1a7, rank);
  const uint64_t r = splitmix64(&state);
  memset(out, 0, 8);
  if (t.kind == Kind::kFloat) t.store(kFloatScalars[r % 9], out);
  else storeBits(t, r & intMask(t), out);
}

struct Case {
  uint64_t id;
  Coll coll;
  ncclDataType_t type;
  size_t count;  // ReduceScatter: per rank
  ncclScalarResidence_t residence;
  bool inPlace;
  int root;  // Reduce only
};

std::string describe(const Case& c) {
  return caseName(collName(c.coll), c.type,
                  c.residence == ncclScalarDevice ? "premulsum(device scalar)" : "premulsum(host scalar)", c.count,
                  c.coll == Coll::kReduce ? c.root : -1, c.inPlace, c.id);
}

std::vector<Case> buildCases(int nranks, size_t buffSize) {
  std::vector<Case> cases;
  size_t k = 0;
  auto add = [&](Coll coll, ncclDataType_t t, size_t count) {
    cases.push_back({caseId(0x9E, {uint64_t(coll), uint64_t(t), count, k}), coll, t, count,
                     k % 2 ? ncclScalarDevice : ncclScalarHostImmediate, (k / 2) % 2 == 1, int(k % size_t(nranks))});
    ++k;
  };
  for (ncclDataType_t t : allTypes()) {
    const TypeInfo& info = typeInfo(t);
    if (buffSize == kDefaultBuffSize) {
      for (Coll coll : {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter})
        for (size_t count : {size_t(1), size_t(13), size_t(127)}) add(coll, t, count);
      add(Coll::kAllReduce, t, 0);
    } else {
      add(Coll::kAllReduce, t, countSpanningChunks(info, buffSize, 3.5));
      add(k % 3 ? Coll::kReduce : Coll::kReduceScatter, t, countSpanningChunks(info, buffSize, 2.5));
    }
  }
  return cases;
}

ncclResult_t callColl(const Case& c, const void* send, void* recv, ncclRedOp_t op, ncclComm_t comm) {
  switch (c.coll) {
    case Coll::kAllReduce: return ncclAllReduce(send, recv, c.count, c.type, op, comm, nullptr);
    case Coll::kReduce: return ncclReduce(send, recv, c.count, c.type, op, c.root, comm, nullptr);
    case Coll::kReduceScatter: return ncclReduceScatter(send, recv, c.count, c.type, op, comm, nullptr);
  }
  return ncclInternalError;
}

bool runCase(ncclComm_t comm, int rank, int nranks, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const std::string what = describe(c);
  const bool scatter = c.coll == Coll::kReduceScatter;
  const size_t inCount = scatter ? c.count * size_t(nranks) : c.count;
  const size_t outBytes = c.count * t.size, inBytes = inCount * t.size;
  const Inputs in = makeInputs(t, ncclSum, nranks, c.id, inCount);
  std::vector<std::vector<unsigned char>> scalars(size_t(nranks), std::vector<unsigned char>(8));
  std::vector<const void*> scalarPtrs;
  for (int r = 0; r < nranks; ++r) {
    makeScalar(t, c.id, r, scalars[size_t(r)].data());
    scalarPtrs.push_back(scalars[size_t(r)].data());
  }

  unsigned char scalar[8];
  memcpy(scalar, scalars[size_t(rank)].data(), 8);
  ncclRedOp_t op;
  if (!callOk(ncclRedOpCreatePreMulSum(&op, scalar, c.type, c.residence, comm), rank, what,
              "ncclRedOpCreatePreMulSum"))
    return false;
  // A host-immediate scalar was copied: changing the caller's copy now must not matter.
  if (c.residence == ncclScalarHostImmediate) memset(scalar, 0x3c, sizeof scalar);

  Region send(inBytes), recv(scatter ? outBytes : inBytes);
  memcpy(send.data(), in.rank(rank), inBytes);
  const void* sendPtr = send.data();
  unsigned char* out = recv.data();
  if (c.inPlace) {
    if (scatter) {
      out = send.data() + size_t(rank) * outBytes;
    } else {
      memcpy(recv.data(), in.rank(rank), inBytes);
      sendPtr = recv.data();
    }
  }

  rankProgress(what);
  if (!callOk(callColl(c, sendPtr, out, op, comm), rank, what, collName(c.coll))) return false;
  if (c.coll != Coll::kReduce || rank == c.root) {
    const size_t offset = scatter ? size_t(rank) * c.count : 0;
    std::string wrong = compareToPreMulSumReference(t, scalarPtrs, in.at(offset, t.size), out, c.count);
    if (!wrong.empty()) caseFail("rank %d of %d: %s: %s", rank, nranks, what.c_str(), wrong.c_str());
  }
  if (c.coll == Coll::kAllReduce) rankRecord(what, hexHash(out, outBytes));
  for (const Region* r : {&send, &recv}) {
    std::string damage = r->guardDamage();
    if (!damage.empty()) caseFail("rank %d of %d: %s: %s", rank, nranks, what.c_str(), damage.c_str());
  }
  return callOk(ncclRedOpDestroy(op, comm), rank, what, "ncclRedOpDestroy");
}

// The scalar behind an ncclScalarDevice op is read at each call; a host-immediate one
// keeps the value it had when the op was made.
bool runScalarResidence(ncclComm_t comm, int rank, int nranks) {
  const TypeInfo& t = typeInfo(ncclFloat32);
  const size_t count = 29;
  const uint64_t id = caseId(0x9E5, {uint64_t(nranks)});
  const Inputs in = makeInputs(t, ncclSum, nranks, id, count);
  std::vector<float> out(count);
  float deviceScalar = 0, hostScalar = 2.0f;
  ncclRedOp_t deviceOp, hostOp;
  const std::string what = "float32 premulsum allreduce of 29 elements";
  if (!callOk(ncclRedOpCreatePreMulSum(&deviceOp, &deviceScalar, ncclFloat32, ncclScalarDevice, comm), rank, what,
              "ncclRedOpCreatePreMulSum(device)") ||
      !callOk(ncclRedOpCreatePreMulSum(&hostOp, &hostScalar, ncclFloat32, ncclScalarHostImmediate, comm), rank, what,
              "ncclRedOpCreatePreMulSum(host)"))
    return false;
  hostScalar = -7.0f;
  // Each rank's scalar depends on the rank and the round, so a stale or shared value shows.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<float>> s(size_t(nranks), std::vector<float>(2));
    std::vector<const void*> ptrs;
    for (int r = 0; r < nranks; ++r) {
      s[size_t(r)][0] = 0.5f * float(round + 1) + 0.25f * float(r);
      ptrs.push_back(s[size_t(r)].data());
    }
    deviceScalar = s[size_t(rank)][0];
    if (!callOk(ncclAllReduce(in.rank(rank), out.data(), count, ncclFloat32, deviceOp, comm, nullptr), rank, what,
                "ncclAllReduce(device-scalar op)"))
      return false;
    std::string wrong = compareToPreMulSumReference(t, ptrs, in.at(0, t.size), out.data(), count);
    if (!wrong.empty())
      caseFail("rank %d of %d: %s, device scalar set to %g before call %d: %s", rank, nranks, what.c_str(),
               double(deviceScalar), round + 1, wrong.c_str());
  }
  const float two = 2.0f;
  std::vector<const void*> twos(size_t(nranks), &two);
  if (!callOk(ncclAllReduce(in.rank(rank), out.data(), count, ncclFloat32, hostOp, comm, nullptr), rank, what,
              "ncclAllReduce(host-scalar op)"))
    return false;
  std::string wrong = compareToPreMulSumReference(t, twos, in.at(0, t.size), out.data(), count);
  if (!wrong.empty())
    caseFail("rank %d of %d: %s: a host-immediate scalar of 2 changed to -7 after ncclRedOpCreatePreMulSum: %s", rank,
             nranks, what.c_str(), wrong.c_str());
  return callOk(ncclRedOpDestroy(deviceOp, comm), rank, what, "ncclRedOpDestroy") &&
         callOk(ncclRedOpDestroy(hostOp, comm), rank, what, "ncclRedOpDestroy");
}

// Several live operators keep their own scalars, and a destroyed one's handle can be
// made again without disturbing the others.
bool runManyOps(ncclComm_t comm, int rank, int nranks) {
  const TypeInfo& t = typeInfo(ncclInt32);
  const size_t count = 17;
  const uint64_t id = caseId(0x9E6, {uint64_t(nranks)});
  const Inputs in = makeInputs(t, ncclSum, nranks, id, count);
  std::vector<int32_t> out(count);
  int32_t values[4] = {3, -5, 7, 1000003};
  ncclRedOp_t ops[4];
  const std::string what = "int32 premulsum allreduce with several live ops";
  for (int i = 0; i < 3; ++i)
    if (!callOk(ncclRedOpCreatePreMulSum(&ops[i], &values[i], ncclInt32, ncclScalarHostImmediate, comm), rank, what,
                "ncclRedOpCreatePreMulSum"))
      return false;
  if (!callOk(ncclRedOpDestroy(ops[1], comm), rank, what, "ncclRedOpDestroy")) return false;
  if (!callOk(ncclRedOpCreatePreMulSum(&ops[3], &values[3], ncclInt32, ncclScalarHostImmediate, comm), rank, what,
              "ncclRedOpCreatePreMulSum"))
    return false;
  for (int i : {2, 0, 3, 0}) {
    if (!callOk(ncclAllReduce(in.rank(rank), out.data(), count, ncclInt32, ops[i], comm, nullptr), rank, what,
                "ncclAllReduce"))
      return false;
    std::vector<const void*> scalars(size_t(nranks), &values[i]);
    std::string wrong = compareToPreMulSumReference(t, scalars, in.at(0, t.size), out.data(), count);
    if (!wrong.empty())
      caseFail("rank %d of %d: %s: op made with scalar %d: %s", rank, nranks, what.c_str(), values[i], wrong.c_str());
  }
  for (int i : {0, 2, 3})
    if (!callOk(ncclRedOpDestroy(ops[i], comm), rank, what, "ncclRedOpDestroy")) return false;
  return true;
}

void runMatrix(int nranks, const char* algo, size_t buffSize, bool sockets = false) {
  const std::vector<Case> cases = buildCases(nranks, buffSize);
  RunConfig config;
  config.nranks = nranks;
  config.algo = algo;
  config.buffSize = buffSize;
  config.sockets = sockets;
  RunResult result = runOnComm(config, [&](int rank, int n, ncclComm_t comm) {
    for (const Case& c : cases)
      if (!runCase(comm, rank, n, c)) return 1;
    if (buffSize == kDefaultBuffSize && (!runScalarResidence(comm, rank, n) || !runManyOps(comm, rank, n))) return 1;
    return 0;
  });
  checkRun(config, result, cases.size(), true);
}

}  // namespace

TEST_CASE("premulsum on 1 rank scales the input by the scalar for every type", "[premulsum]") {
  runMatrix(1, nullptr, kDefaultBuffSize);
}

TEST_CASE("premulsum over 2 ranks with ring allreduce sums each rank's input times its own scalar",
          "[premulsum][ring]") {
  runMatrix(2, "Ring", kDefaultBuffSize);
}

TEST_CASE("premulsum over 3 ranks on sockets with tree allreduce sums each rank's input times its own scalar",
          "[premulsum][tree][sockets]") {
  runMatrix(3, "Tree", kDefaultBuffSize, true);
}

TEST_CASE("premulsum over 4 ranks with ring allreduce sums each rank's input times its own scalar",
          "[premulsum][ring]") {
  runMatrix(4, "Ring", kDefaultBuffSize);
}

TEST_CASE("premulsum over 4 ranks with tree allreduce sums each rank's input times its own scalar",
          "[premulsum][tree]") {
  runMatrix(4, "Tree", kDefaultBuffSize);
}

TEST_CASE("premulsum over 2 ranks with tree allreduce pipelines counts spanning many 8 KiB chunks",
          "[premulsum][tree][pipeline]") {
  runMatrix(2, "Tree", kSmallBuffSize);
}

TEST_CASE("premulsum over 3 ranks on sockets with ring allreduce pipelines counts spanning many 8 KiB chunks",
          "[premulsum][ring][pipeline][sockets]") {
  runMatrix(3, "Ring", kSmallBuffSize, true);
}
