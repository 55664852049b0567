#include "lying_run.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "../support/fork_ranks.h"
#include "../support/shared_flags.h"
#include "fault_row.h"
#include "src/comm/comm.h"

namespace gyre::test {
namespace {

constexpr size_t kGuard = 256;
constexpr int32_t kGuardValue = 0x5a5a5a5a;
constexpr int kHonest = 0, kLiar = 1;

const char* nameOf(Path p) { return p == Path::kShm ? "SHM" : p == Path::kSocket ? "NET/Socket" : "NET/IB"; }

// The liar's part: forged steps (or a notice, or acknowledgements) instead
// of the call; "" or why the forging failed. *closeAfter gets the
// descriptors the forgeries point at, to keep open until rank 0 is done.
std::string forgeInstead(ncclComm_t comm, const Lie& lie, std::vector<int>* closeAfter) {
  if (lie.acknowledgesAhead) {
    Connection* in = ringRecvFrom(comm, kHonest);
    if (!in) return "no ring connection from rank 0";
    rankRecord("transport", in->transport->via(*in));
    return forgeAcknowledgement(*in, *lie.acknowledgesAhead);
  }
  Connection* c = ringSendTo(comm, kHonest);
  if (!c) return "no ring connection to rank 0";
  rankRecord("transport", c->transport->via(*c));
  if (lie.notice) return forgeAbortNotice(*c, 7);
  const std::vector<char> all = payloadOf(lie.count);
  for (size_t k = 0; k <= lie.atStep + lie.honestAfter; ++k) {
    ForgedStep step;
    step.meta = honestBroadcastMeta(lie.count, kLiar, c->fifo.slotBytes, k);
    const auto from = all.begin() + static_cast<ptrdiff_t>(std::min(all.size(), k * c->fifo.slotBytes));
    step.payload.assign(from, from + step.meta.bytes);
    step.lineStep = k;
    step.lineSeq = k + 1;
    if (lie.every) lie.every(k, &step);
    if (k == lie.atStep && lie.forge) lie.forge(&step);
    if (step.closeAfter >= 0) closeAfter->push_back(step.closeAfter);
    const std::string why = forgeStep(*c, step);
    if (!why.empty()) return "step " + std::to_string(k) + ": " + why;
  }
  return "";
}

// The honest rank's part: the Broadcast, rooted at the liar (or at itself
// when the liar lies in acknowledgements), and its checks: 0, or 1 after a
// failure (RANK_CHECK).
int runHonestly(ncclComm_t comm, const Lie& lie, SharedFlags& flags) {
  const bool roots = lie.acknowledgesAhead.has_value();
  const std::vector<char> want = payloadOf(lie.count);
  std::vector<int32_t> buffer(lie.count + 2 * kGuard, kGuardValue), in(lie.count);
  memcpy(in.data(), want.data(), want.size());
  int32_t* out = buffer.data() + kGuard;
  const Connection* from = ringRecvFrom(comm, kLiar);
  const size_t slotBytes = from ? from->fifo.slotBytes : 0;
  const double t0 = monotonicSeconds();
  const ncclResult_t r = ncclBroadcast(in.data(), out, lie.count, ncclInt32, roots ? kHonest : kLiar, comm, nullptr);
  const double took = monotonicSeconds() - t0;
  const std::string error = lastError();
  flags.markDone(kHonest);
  recordOutcome(r, error);
  rankRecord("error", error);
  for (size_t i = 0; i < kGuard; ++i)
    RANK_CHECK(buffer[i] == kGuardValue && buffer[kGuard + lie.count + i] == kGuardValue,
               "a guard element %zu past the receive buffer was written", i);
  if (lie.said.empty()) {
    RANK_CHECK(r == ncclSuccess, "the honest forgery failed: %s", error.c_str());
    RANK_CHECK(memcmp(out, want.data(), want.size()) == 0, "the honest forgery's data did not arrive");
  } else {
    RANK_CHECK(r != ncclSuccess, "the call succeeded on a lie");
    RANK_CHECK(containsWord(error, "rank 1"), "the error names no rank 1: %s", error.c_str());
    for (const std::string& phrase : lie.said)
      RANK_CHECK(error.find(phrase) != std::string::npos, "the error does not say \"%s\": %s", phrase.c_str(),
                 error.c_str());
    // The honest steps before the lie were taken as the call's data.
    if (!roots && lie.atStep > 0) {
      const size_t before = std::min(want.size(), lie.atStep * slotBytes);
      RANK_CHECK(memcmp(out, want.data(), before) == 0, "the %zu steps before the lie did not arrive", lie.atStep);
    }
  }
  // Never past GYRE_TIMEOUT: a lie that is detected says so in its error
  // (checked above); one that only starves this rank is found by the timeout.
  RANK_CHECK(took < kLieTimeout_s + 3.0, "took %.1f s (GYRE_TIMEOUT=%d)", took, kLieTimeout_s);
  if (lie.waitsForTimeout)
    RANK_CHECK(took > kLieTimeout_s - 0.5, "failed after %.1f s, before GYRE_TIMEOUT=%d", took, kLieTimeout_s);
  return 0;
}

}  // namespace

std::vector<Path> everyPath() {
  std::vector<Path> paths = {Path::kShm, Path::kSocket};
  if (getenv("GYRE_IBVERBS_LIB")) paths.push_back(Path::kIb);
  else WARN("IB path not run: GYRE_IBVERBS_LIB is unset (a build without infiniband/verbs.h)");
  return paths;
}

std::vector<char> payloadOf(size_t count) {
  std::vector<char> p(count * sizeof(int32_t));
  for (size_t i = 0; i < count; ++i) {
    const int32_t v = static_cast<int32_t>(1000 + i);
    memcpy(p.data() + i * sizeof(v), &v, sizeof(v));
  }
  return p;
}

void runLie(Path path, const Lie& lie) {
  const char* pathName = nameOf(path);
  INFO(std::string(pathName) + ": " + lie.name);
  RankOptions o;
  o.timeout_s = 30;
  o.env = {{"GYRE_TIMEOUT", std::to_string(kLieTimeout_s)}, {"GYRE_INIT_TIMEOUT", "10"}, {"NCCL_ALGO", "Ring"},
           {"NCCL_MIN_NCHANNELS", "1"}, {"NCCL_MAX_NCHANNELS", "1"}, {"GYRE_SINGLE_COPY", "off"},
           {"NCCL_SOCKET_IFNAME", "lo"}};
  if (path != Path::kShm) o.env.push_back({"NCCL_SHM_DISABLE", "1"});
  if (path == Path::kIb) o.env.push_back({"NCCL_NET", "IB"});
  else o.env.push_back({"GYRE_IBVERBS_LIB", std::nullopt});  // IB stays out of the other paths' ranks
  o.env.insert(o.env.end(), lie.env.begin(), lie.env.end());
  SharedFlags flags;
  REQUIRE(flags.ok());
  const int shm = gyreShmSegments();
  RunResult result = runRanks(
      2,
      [&](int rank, int n, const ncclUniqueId& id) {
        const Baseline b = takeBaseline();
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "rank %d: init: %s", rank,
                   lastError().c_str());
        if (rank == kLiar) {
          std::vector<int> closeAfter;
          const std::string why = forgeInstead(comm, lie, &closeAfter);
          const bool seen = flags.waitDone(kHonest, kLieTimeout_s + 8);
          for (int fd : closeAfter) close(fd);
          ncclCommAbort(comm);
          RANK_CHECK(why.empty(), "forging: %s", why.c_str());
          RANK_CHECK(seen, "rank 0 never finished its call");
        } else {
          if (runHonestly(comm, lie, flags) != 0) return 1;
          ncclCommAbort(comm);
        }
        long mrs = 0, qps = 0, contexts = 0;
        verbsLeft(&mrs, &qps, &contexts);
        Baseline withDevices = b;  // IB device contexts stay open for the process
        withDevices.fds += static_cast<int>(contexts);
        const std::string left = recordLeftovers(withDevices);
        RANK_CHECK(left.empty(), "rank %d: after ncclCommAbort: %s", rank, left.c_str());
        RANK_CHECK(mrs == 0 && qps == 0, "rank %d: %ld MRs and %ld QPs left after ncclCommAbort", rank, mrs, qps);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
  CHECK(gyreShmSegments() == shm);
  if (!result.ranks.empty() && result.ranks.size() > kLiar) {
    auto it = result.ranks[kLiar].records.find("transport");
    CHECK((it != result.ranks[kLiar].records.end() && it->second.rfind(pathName, 0) == 0));
  }
}

void runOnEveryPath(const std::vector<Lie>& lies) {
  for (Path path : everyPath())
    for (const Lie& lie : lies) runLie(path, lie);
}

}  // namespace gyre::test
