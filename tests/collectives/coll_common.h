// coll_common.h — what the collective matrix tests share: one forked run per
// configuration (rank count, NCCL_BUFFSIZE, NCCL_ALGO, transport) with one host
// communicator per rank and many cases inside it, guarded buffers, per-case inputs that
// every rank can regenerate, and the parent-side checks of a run.
//
// A rank reports a wrong case with caseFail() and goes on with the next case, so one
// run shows every wrong case (up to kMaxFailuresPerRank) instead of only the first.
// A call that returns an error ends the rank: after a failed collective the
// communicator is not usable, and the peers would time out on the next case anyway.
#ifndef GYRE_TESTS_COLLECTIVES_COLL_COMMON_H_
#define GYRE_TESTS_COLLECTIVES_COLL_COMMON_H_

#include <catch2/catch.hpp>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../support/fork_ranks.h"
#include "../support/reference.h"

namespace gyre::test::coll {

constexpr size_t kDefaultBuffSize = 4194304;  // NCCL_BUFFSIZE default: 512 KiB per pipeline step
constexpr size_t kSmallBuffSize = 65536;      // 8 KiB per pipeline step, so modest counts span chunks
constexpr size_t kGuard = 64;                 // bytes checked on each side of a buffer
constexpr unsigned char kGuardByte = 0xA5;
constexpr unsigned char kUnwrittenByte = 0x5A;
constexpr int kMaxFailuresPerRank = 24;

// All twelve datatypes, in enum order.
inline const std::vector<ncclDataType_t>& allTypes() {
  static const std::vector<ncclDataType_t> types = {
      ncclInt8,    ncclUint8,   ncclInt32,    ncclUint32,     ncclInt64,     ncclUint64,
      ncclFloat16, ncclFloat32, ncclFloat64,  ncclBfloat16,   ncclFloat8e4m3, ncclFloat8e5m2};
  return types;
}
inline const std::vector<ncclRedOp_t>& builtinOps() {
  static const std::vector<ncclRedOp_t> ops = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  return ops;
}

// Counts of the full matrix: 0, 1 and small primes (all but 2 and 3 indivisible by every
// rank count 2..4).
inline const std::vector<size_t>& smallCounts() {
  static const std::vector<size_t> counts = {0, 1, 2, 3, 7, 13, 31, 127};
  return counts;
}

// Elements that make `chunks` and a bit pipeline steps of NCCL_BUFFSIZE/8 bytes, plus a
// prime-ish remainder so the last chunk is partial and not aligned.
inline size_t countSpanningChunks(const TypeInfo& t, size_t buffSize, double chunks) {
  return size_t(double(buffSize / 8) * chunks) / t.size + 5;
}

// Ops for the sampled large counts, by rotation. Prod's inputs are made with a
// long-double pow per element, so with tens of thousands of elements per rank (and
// every rank making every rank's input) it runs only where allowed and on 4- and 8-byte
// types, which fit fewer elements in a chunk.
inline ncclRedOp_t largeCountOp(const TypeInfo& t, size_t rotation, bool allowProd) {
  static const ncclRedOp_t cheap[] = {ncclSum, ncclMax, ncclAvg, ncclMin};
  if (allowProd && t.size >= 4 && rotation % 2 == 0) return ncclProd;
  return cheap[rotation % 4];
}

// A stable 64-bit id for a case: a per-file salt and the case's fields.
inline uint64_t caseId(uint64_t salt, std::initializer_list<uint64_t> fields) {
  uint64_t h = salt * 0x9e3779b97f4a7c15ull + 0x51ed270b;
  for (uint64_t f : fields) {
    h ^= f + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h = splitmix64(&h);
  }
  return h;
}

// ---- Rank side ----------------------------------------------------------------------------

// Like rankFail, but ends the rank's useful reporting after kMaxFailuresPerRank.
inline void caseFail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void caseFail(const char* fmt, ...) {
  if (rankFailureCount() == kMaxFailuresPerRank) {
    rankFail("(further failures of this rank not shown)");
    return;
  }
  if (rankFailureCount() > kMaxFailuresPerRank) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  rankFail("%s", buf);
}

// Whether a rank's buffers come from gyreMemAllocHost (memory its peers can
// map: single-copy steps then memcpy through the mapping) instead of the heap.
// Set for a run with RunConfig::env {"GYRE_TEST_SHARED_BUFFERS", "1"}.
inline bool sharedTestBuffers() {
  const char* v = getenv("GYRE_TEST_SHARED_BUFFERS");
  return v && strcmp(v, "1") == 0;
}

// Storage of a Region: heap, or a gyreMemAllocHost allocation.
class RegionBytes {
 public:
  explicit RegionBytes(size_t n) : n_(n), shared_(sharedTestBuffers()) {
    if (shared_) {
      void* p = nullptr;
      if (gyreMemAllocHost(&p, n) != ncclSuccess || !p) {
        fprintf(stderr, "gyreMemAllocHost(%zu) failed: %s\n", n, ncclGetLastError(nullptr));
        abort();
      }
      p_ = static_cast<unsigned char*>(p);
    } else {
      heap_.resize(n);
      p_ = heap_.data();
    }
  }
  ~RegionBytes() {
    if (shared_) gyreMemFreeHost(p_);
  }
  RegionBytes(RegionBytes&& other) noexcept
      : n_(other.n_), shared_(other.shared_), heap_(std::move(other.heap_)), p_(other.p_) {
    if (!shared_) p_ = heap_.data();
    other.shared_ = false;  // the moved-from one frees nothing
    other.p_ = nullptr;
  }
  RegionBytes(const RegionBytes&) = delete;
  RegionBytes& operator=(const RegionBytes&) = delete;
  RegionBytes& operator=(RegionBytes&&) = delete;
  unsigned char* data() { return p_; }
  const unsigned char* data() const { return p_; }
  size_t size() const { return n_; }
  unsigned char& operator[](size_t i) { return p_[i]; }
  const unsigned char& operator[](size_t i) const { return p_[i]; }

 private:
  size_t n_;
  bool shared_;
  std::vector<unsigned char> heap_;
  unsigned char* p_ = nullptr;
};

// A buffer of `bytes` between guard bands, optionally starting `skew` bytes past the
// guard so a buffer is aligned to its element but not to 16 bytes.
class Region {
 public:
  Region(size_t bytes, size_t skew = 0, unsigned char fill = kUnwrittenByte)
      : front_(kGuard + skew), bytes_(bytes), mem_(front_ + bytes + kGuard) {
    std::fill(mem_.data(), mem_.data() + mem_.size(), kGuardByte);
    std::fill(mem_.data() + front_, mem_.data() + front_ + bytes, fill);
  }
  unsigned char* data() { return mem_.data() + front_; }
  const unsigned char* data() const { return mem_.data() + front_; }
  size_t bytes() const { return bytes_; }
  // "" if no guard byte changed, else where the first change is.
  std::string guardDamage() const {
    char buf[96];
    for (size_t i = 0; i < front_; ++i)
      if (mem_[i] != kGuardByte) {
        snprintf(buf, sizeof buf, "guard byte %zd before the buffer was overwritten", ssize_t(i) - ssize_t(front_));
        return buf;
      }
    for (size_t i = 0; i < kGuard; ++i)
      if (mem_[front_ + bytes_ + i] != kGuardByte) {
        snprintf(buf, sizeof buf, "guard byte %zu past the end was overwritten", i);
        return buf;
      }
    return "";
  }

 private:
  size_t front_, bytes_;
  RegionBytes mem_;
};

// reference.h's fp8 codec finds the nearest code by scanning all 256, which dominates a
// case with tens of thousands of fp8 elements per rank. For making inputs only, the
// same nearest-value rule by binary search over the sorted finite codes (a tie may go
// either way, as there).
namespace detail {
template <long double (*Decode)(uint8_t)>
inline void storeFp8Nearest(long double v, void* p) {
  static const std::vector<std::pair<long double, uint8_t>> sorted = [] {
    std::vector<std::pair<long double, uint8_t>> all;
    for (int c = 0; c < 256; ++c)
      if (std::isfinite(Decode(uint8_t(c)))) all.push_back({Decode(uint8_t(c)), uint8_t(c)});
    std::sort(all.begin(), all.end());
    return all;
  }();
  auto it = std::lower_bound(sorted.begin(), sorted.end(), std::make_pair(v, uint8_t(0)));
  if (it == sorted.end()) it = sorted.end() - 1;
  if (it != sorted.begin() && std::fabs(std::prev(it)->first - v) < std::fabs(it->first - v)) it = std::prev(it);
  *static_cast<uint8_t*>(p) = it->second;
}
}  // namespace detail

// typeInfo(type) with the fast fp8 store above; use it only to make inputs.
inline const TypeInfo& inputTypeInfo(ncclDataType_t type) {
  static const std::vector<TypeInfo> table = [] {
    std::vector<TypeInfo> t = typeTable();
    for (TypeInfo& info : t) {
      if (info.type == ncclFloat8e4m3) info.store = detail::storeFp8Nearest<ref_detail::decodeE4m3>;
      if (info.type == ncclFloat8e5m2) info.store = detail::storeFp8Nearest<ref_detail::decodeE5m2>;
    }
    return t;
  }();
  for (const TypeInfo& info : table)
    if (info.type == type) return info;
  return table.front();
}

// One rank's input for one case (see fillInput).
inline void fillRankInput(ncclDataType_t type, ncclRedOp_t op, int nranks, uint64_t id, int rank, void* buf,
                          size_t count) {
  fillInput(inputTypeInfo(type), op, nranks, inputSeed(id, rank), buf, count);
}

// Every rank's input for one case: `count` elements per rank, seeded by (id, rank).
struct Inputs {
  std::vector<std::vector<char>> data;  // by rank
  // Pointers to element `offset` of every rank's input (for checkElement).
  std::vector<const void*> at(size_t offset, size_t typeSize) const {
    std::vector<const void*> p;
    for (const auto& d : data) p.push_back(d.data() + offset * typeSize);
    return p;
  }
  // Never NULL, so it can go to memcpy/memcmp with a zero count's 0 bytes.
  const char* rank(int r) const {
    static const char kNone = 0;
    const std::vector<char>& d = data[size_t(r)];
    return d.empty() ? &kNone : d.data();
  }
};

inline Inputs makeInputs(const TypeInfo& t, ncclRedOp_t op, int nranks, uint64_t id, size_t count) {
  Inputs in;
  in.data.resize(size_t(nranks));
  for (int r = 0; r < nranks; ++r) {
    in.data[size_t(r)].resize(count * t.size);
    fillRankInput(t.type, op, nranks, id, r, in.data[size_t(r)].data(), count);
  }
  return in;
}

inline std::string hexHash(const void* data, size_t bytes) {
  char hex[32];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a(data, bytes));
  return hex;
}

// Byte-exact comparison; describes the first differing element, or "".
inline std::string compareExact(const TypeInfo& t, const void* got, const void* want, size_t count) {
  if (count == 0 || memcmp(got, want, count * t.size) == 0) return "";
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < count; ++i)
    if (memcmp(static_cast<const char*>(got) + i * t.size, static_cast<const char*>(want) + i * t.size, t.size) != 0)
      if (wrong++ == 0) first = i;
  char buf[256];
  snprintf(buf, sizeof buf, "[%zu] got %s, expected %s; %zu of %zu elements wrong", first,
           formatElement(t, static_cast<const char*>(got) + first * t.size).c_str(),
           formatElement(t, static_cast<const char*>(want) + first * t.size).c_str(), wrong, count);
  return buf;
}

// "reduce float16 max count 13 root 2 in-place (case 0x1234)": what a failure line names.
inline std::string caseName(const char* coll, ncclDataType_t type, const char* op, size_t count, int root,
                            bool inPlace, uint64_t id, const char* extra = "") {
  char buf[256];
  char rootText[24] = "";
  if (root >= 0) snprintf(rootText, sizeof rootText, " root %d", root);
  snprintf(buf, sizeof buf, "%s %s%s%s count %zu%s %s%s (case %016llx)", coll, typeInfo(type).name, op ? " " : "",
           op ? op : "", count, rootText, inPlace ? "in-place" : "out-of-place", extra, (unsigned long long)id);
  return buf;
}

// Reports a call's failure; returns false (the rank should stop) when it failed.
inline bool callOk(ncclResult_t r, int rank, const std::string& what, const char* call) {
  if (r == ncclSuccess) return true;
  rankFail("rank %d: %s: %s returned %d (%s): %s", rank, what.c_str(), call, int(r), ncclGetErrorString(r),
           lastError().c_str());
  return false;
}

// With GYRE_TEST_DEVICE_COMMS=1 (and GYRE_FAKE_CUDA=2, whose streams finish
// each call before it returns) the same tests run on device communicators of
// the fake CUDA runtime: the device executor's lanes instead of the host's.
inline bool testDeviceComms() {
  const char* v = getenv("GYRE_TEST_DEVICE_COMMS");
  return v && v[0] == '1';
}

inline int initHostComm(ncclComm_t* comm, int rank, int nranks, const ncclUniqueId& id) {
  if (testDeviceComms()) {
    ncclResult_t r = ncclCommInitRank(comm, nranks, id, rank);
    RANK_CHECK(r == ncclSuccess, "rank %d: ncclCommInitRank (fake device) returned %d: %s", rank, int(r),
               lastError().c_str());
    return 0;
  }
  ncclResult_t r = gyreCommInitRankHost(comm, nranks, id, rank, nullptr);
  RANK_CHECK(r == ncclSuccess, "rank %d: gyreCommInitRankHost returned %d: %s", rank, int(r), lastError().c_str());
  return 0;
}

// ---- Parent side --------------------------------------------------------------------------

struct RunConfig {
  int nranks = 2;
  size_t buffSize = kDefaultBuffSize;
  const char* algo = nullptr;  // NCCL_ALGO, or unset
  IdMode mode = IdMode::kParent;
  bool sockets = false;   // NCCL_SHM_DISABLE=1: ranks of one host talk over sockets, as across hosts
  double timeout_s = 45;  // a backstop for a hang; each run takes seconds
  // How many times a matrix runs each case back to back, each time on fresh
  // buffers. From the second call on, a lone call repeats the previous call's
  // shape, so the executor reuses that call's plan and lanes
  // (src/host/repeat_call.h) with the new buffers.
  int callsPerCase = 1;
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  decltype(RankOptions::rankEnv) rankEnv;  // per-rank variables (needs mode kEnvCommId)
};

inline std::string describeConfig(const RunConfig& c) {
  std::string s = std::to_string(c.nranks) + " ranks, NCCL_BUFFSIZE=" + std::to_string(c.buffSize) +
                  ", NCCL_ALGO=" + (c.algo ? c.algo : "(unset)") + (c.sockets ? ", NCCL_SHM_DISABLE=1" : "") +
                  (c.callsPerCase > 1 ? ", " + std::to_string(c.callsPerCase) + " calls per case" : "");
  return s;
}

using CommFn = std::function<int(int rank, int nranks, ncclComm_t comm)>;

// Runs fn on an initialised host communicator on each of c.nranks forked ranks, then
// destroys it. fn's non-zero return (or a RANK_CHECK) fails the rank.
inline RunResult runOnComm(const RunConfig& c, const CommFn& fn) {
  RankOptions options;
  options.idMode = c.mode;
  options.timeout_s = c.timeout_s;
  options.env = {{"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"}, {"NCCL_ALGO", std::nullopt},
                 {"NCCL_BUFFSIZE", std::nullopt}, {"NCCL_SHM_DISABLE", std::nullopt}};
  if (c.sockets) options.env.push_back({"NCCL_SHM_DISABLE", "1"});
  if (c.buffSize != kDefaultBuffSize) options.env.push_back({"NCCL_BUFFSIZE", std::to_string(c.buffSize)});
  if (c.algo) options.env.push_back({"NCCL_ALGO", c.algo});
  for (const auto& e : c.env) options.env.push_back(e);
  options.rankEnv = c.rankEnv;
  return runRanks(
      c.nranks,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        int rc = fn(rank, n, comm);
        if (rc != 0) {
          ncclCommAbort(comm);  // the peers may be stuck in a call this rank gave up on
          return rc;
        }
        ncclResult_t r = ncclCommDestroy(comm);
        RANK_CHECK(r == ncclSuccess, "rank %d: ncclCommDestroy returned %d: %s", rank, int(r), lastError().c_str());
        return rankFailureCount() == 0 ? 0 : 1;
      },
      options);
}

// Keys whose value differs between the ranks that recorded them, ignoring ranks that
// did not record the key ("" if none). For records only some ranks make, such as
// results on a communicator split off from the run's.
inline std::string recordDisagreements(const RunResult& result) {
  std::map<std::string, std::map<std::string, std::vector<int>>> byKey;  // key -> value -> ranks
  for (const RankOutcome& r : result.ranks)
    for (const auto& [key, value] : r.records) byKey[key][value].push_back(r.rank);
  std::string out;
  for (const auto& [key, values] : byKey) {
    if (values.size() < 2) continue;
    out.append(key).append(":");
    for (const auto& [value, ranks] : values)
      for (int rank : ranks) out.append(" rank").append(std::to_string(rank)).append("=").append(value);
    out.append("\n");
  }
  return out;
}

// Catch2 checks of a run: every rank ok, and (if asked) every rankRecord key agreeing.
inline void checkRun(const RunConfig& c, const RunResult& result, size_t cases, bool agreement) {
  INFO(describeConfig(c) << ": " << cases << " cases per rank in " << result.elapsed_s << " s");
  INFO(result.describe());
  CHECK(result.allOk());
  if (agreement) {
    const std::string mismatches = result.recordMismatches();
    INFO("results that differ between ranks:\n" << mismatches);
    CHECK(mismatches.empty());
  }
}

}  // namespace gyre::test::coll

#endif  // GYRE_TESTS_COLLECTIVES_COLL_COMMON_H_
