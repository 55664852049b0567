// A lying peer: rank 1 of a 2-rank communicator joins it honestly, then,
// instead of running the Broadcast it roots, writes one forged step into its
// ring connection to rank 0 (forged_steps.h): a well-formed header whose
// size, count, sequence number, root, collective, datatype or operator lies,
// a single-copy announcement whose offset wraps around 2^64, or an abort
// notice naming a rank past the communicator. Rank 0 runs the
// Broadcast honestly. On shared memory, on sockets and on IB (the fake
// verbs provider of tests/net, where the build has verbs.h and
// GYRE_IBVERBS_LIB names it: there is no RDMA hardware) its call must
// fail, before GYRE_TIMEOUT plus a margin, with an error naming rank 1 and
// the lie; nothing outside its receive buffer may be written (guard bytes on
// both sides); and after ncclCommAbort both ranks are back to the fds and
// threads they had before init, with no /dev/shm entry left.
// An honest forgery (every field true) must be taken as the call's data,
// which shows that each failure below comes from its lie alone.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "../support/shared_flags.h"
#include "fault_row.h"
#include "forged_steps.h"
#include "src/host/peer_mappings.h"

namespace {

using namespace gyre;
using namespace gyre::test;

constexpr int kTimeout_s = 3;  // leaves a loaded machine time to deliver the forged step
constexpr size_t kCount = 64;  // 256 bytes: one step, in a slot line's payload block on shared memory
constexpr size_t kGuard = 256;
constexpr int32_t kGuardValue = 0x5a5a5a5a;
constexpr int kHonest = 0, kLiar = 1;

enum class Path { kShm, kSocket, kIb };

const char* nameOf(Path p) { return p == Path::kShm ? "SHM" : p == Path::kSocket ? "NET/Socket" : "NET/IB"; }

// The paths this build can run: IB only with the fake verbs provider.
std::vector<Path> everyPath() {
  std::vector<Path> paths = {Path::kShm, Path::kSocket};
  if (getenv("GYRE_IBVERBS_LIB")) paths.push_back(Path::kIb);
  else WARN("IB path not run: GYRE_IBVERBS_LIB is unset (a build without infiniband/verbs.h)");
  return paths;
}

// What the liar does to the honest step, and what rank 0's error must say.
struct Lie {
  std::string name;
  std::function<void(ForgedStep*)> forge;
  std::vector<std::string> said;  // phrases rank 0's error contains (besides "rank 1")
  bool notice = false;            // send an abort notice naming rank 7 instead of a step
  bool waitsForTimeout = false;   // detected only by GYRE_TIMEOUT (the data never comes)
  std::vector<std::pair<std::string, std::optional<std::string>>> env = {};  // more settings for both ranks
};

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
  o.env = {{"GYRE_TIMEOUT", std::to_string(kTimeout_s)}, {"GYRE_INIT_TIMEOUT", "10"}, {"NCCL_ALGO", "Ring"},
           {"NCCL_MIN_NCHANNELS", "1"}, {"NCCL_MAX_NCHANNELS", "1"}, {"GYRE_SINGLE_COPY", "off"},
           {"NCCL_SOCKET_IFNAME", "lo"}};
  if (path != Path::kShm) o.env.push_back({"NCCL_SHM_DISABLE", "1"});
  if (path == Path::kIb) o.env.push_back({"NCCL_NET", "IB"});
  else o.env.push_back({"GYRE_IBVERBS_LIB", std::nullopt});  // IB stays out of the other paths' ranks
  o.env.insert(o.env.end(), lie.env.begin(), lie.env.end());
  SharedFlags flags;
  REQUIRE(flags.ok());
  const int shm = gyreShmSegments();
  const bool control = lie.said.empty();
  RunResult result = runRanks(
      2,
      [&](int rank, int n, const ncclUniqueId& id) {
        const Baseline b = takeBaseline();
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "rank %d: init: %s", rank,
                   lastError().c_str());
        if (rank == kLiar) {
          Connection* c = ringSendTo(comm, kHonest);
          RANK_CHECK(c != nullptr, "no ring connection to rank 0");
          rankRecord("transport", c->transport->via(*c));
          std::string why;
          ForgedStep step;
          if (lie.notice) {
            why = forgeAbortNotice(*c, 7);
          } else {
            step.meta = honestBroadcastMeta(kCount, kLiar);
            step.payload = payloadOf(kCount);
            if (lie.forge) lie.forge(&step);
            why = forgeStep(*c, step);
          }
          const bool seen = flags.waitDone(kHonest, kTimeout_s + 8);
          if (step.closeAfter >= 0) close(step.closeAfter);
          ncclCommAbort(comm);
          RANK_CHECK(why.empty(), "forging: %s", why.c_str());
          RANK_CHECK(seen, "rank 0 never finished its call");
        } else {
          std::vector<int32_t> buffer(kCount + 2 * kGuard, kGuardValue), unused(kCount);
          int32_t* out = buffer.data() + kGuard;
          const double t0 = monotonicSeconds();
          const ncclResult_t r = ncclBroadcast(unused.data(), out, kCount, ncclInt32, kLiar, comm, nullptr);
          const double took = monotonicSeconds() - t0;
          const std::string error = lastError();
          flags.markDone(kHonest);
          recordOutcome(r, error);
          rankRecord("error", error);
          for (size_t i = 0; i < kGuard; ++i)
            RANK_CHECK(buffer[i] == kGuardValue && buffer[kGuard + kCount + i] == kGuardValue,
                       "a guard element %zu past the receive buffer was written", i);
          if (control) {
            RANK_CHECK(r == ncclSuccess, "the honest forgery failed: %s", error.c_str());
            const std::vector<char> want = payloadOf(kCount);
            RANK_CHECK(memcmp(out, want.data(), want.size()) == 0, "the honest forgery's data did not arrive");
          } else {
            RANK_CHECK(r != ncclSuccess, "the call succeeded on a lying step");
            RANK_CHECK(containsWord(error, "rank 1"), "the error names no rank 1: %s", error.c_str());
            for (const std::string& phrase : lie.said)
              RANK_CHECK(error.find(phrase) != std::string::npos, "the error does not say \"%s\": %s",
                         phrase.c_str(), error.c_str());
          }
          // Never past GYRE_TIMEOUT: a lie that is detected says so in its
          // error (checked above); one that only starves this rank is found
          // by the timeout.
          RANK_CHECK(took < kTimeout_s + 3.0, "took %.1f s (GYRE_TIMEOUT=%d)", took, kTimeout_s);
          if (lie.waitsForTimeout)
            RANK_CHECK(took > kTimeout_s - 0.5, "failed after %.1f s, before GYRE_TIMEOUT=%d", took, kTimeout_s);
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

}  // namespace

TEST_CASE("an honest forgery of the root's step is taken as the Broadcast's data on every path",
          "[faults][lying]") {
  runOnEveryPath({{"no lie", nullptr, {}}});
}

TEST_CASE("a step header whose size exceeds the slot or falls short of the step fails naming the sender",
          "[faults][lying]") {
  runOnEveryPath({
      {"size past the slot", [](ForgedStep* s) { s->meta.bytes = 64 << 20; }, {"67108864"}},
      {"size short of the step", [](ForgedStep* s) {
         s->meta.bytes = 128;
         s->payload.resize(128);
       }, {"128 bytes"}},
  });
}

TEST_CASE("a step whose payload is shorter than its header fails naming the sender (on a socket by GYRE_TIMEOUT)",
          "[faults][lying]") {
  auto shortPayload = [](ForgedStep* s) { s->payload.resize(100); };
  // A socket stream has no message boundaries: the rest is awaited.
  Lie awaited{"payload shorter than its header", shortPayload, {"rank 1"}};
  awaited.waitsForTimeout = true;
  runLie(Path::kSocket, awaited);
  // A network message is whole: its size is compared with the header's.
  for (Path path : everyPath())
    if (path == Path::kIb)
      runLie(path, {"payload shorter than its header", shortPayload, {"carried 100 bytes, its header says 256"}});
}

TEST_CASE("a step header with a count, call number or root past the call fails naming the sender and the value",
          "[faults][lying]") {
  runOnEveryPath({
      {"count past the buffer", [](ForgedStep* s) { s->meta.count = 1 << 30; }, {"mismatched", "1073741824"}},
      {"call number replayed", [](ForgedStep* s) { s->meta.opCount = 0; }, {"mismatched", "#0"}},
      {"call number far ahead", [](ForgedStep* s) { s->meta.opCount = 1001; }, {"mismatched", "#1001"}},
      {"root past the communicator", [](ForgedStep* s) { s->meta.root = 5; }, {"mismatched", "root 5"}},
  });
}

TEST_CASE("a step header whose collective, datatype or operator byte is outside its enum fails naming the byte",
          "[faults][lying]") {
  runOnEveryPath({
      {"collective byte 99", [](ForgedStep* s) { s->meta.coll = 99; }, {"mismatched", "collective 99"}},
      {"datatype byte 200", [](ForgedStep* s) { s->meta.datatype = 200; }, {"mismatched", "datatype 200"}},
      {"operator byte 0x77", [](ForgedStep* s) { s->meta.redop = 0x77; }, {"mismatched", "op 119"}},
  });
}

TEST_CASE("a shared-memory step marked with another step's sequence number fails naming the sender",
          "[faults][lying]") {
  Lie ahead{"sequence word far ahead", [](ForgedStep* s) { s->lineSeq = 1000; }, {"step 1 ", "as step 1000"}};
  runLie(Path::kShm, ahead);
  Lie skipped{"step 1 skipped: written as step 2", [](ForgedStep* s) {
                s->lineStep = 1;
                s->lineSeq = 2;
              }, {"rank 1"}};
  skipped.waitsForTimeout = true;
  runLie(Path::kShm, skipped);
}

TEST_CASE("an abort notice naming a rank past the communicator blames the rank that sent it", "[faults][lying]") {
  Lie notice{"abort notice naming rank 7 of 2", nullptr, {"rank 7", "not a rank of this 2-rank communicator"}};
  notice.notice = true;
  runOnEveryPath({notice});
}

TEST_CASE("a single-copy announcement whose offset wraps around 2^64 fails naming the sender instead of being mapped",
          "[faults][lying]") {
  // GYRE_SINGLE_COPY=always: the root's first step announces where its
  // elements are (a PeerAddress in the step's line) and rank 0 reads them
  // from there (on 2 ranks the first two thirds of the piece, 43 of the 64
  // elements: a 172-byte step). The lie names a real memfd of the liar, so
  // rank 0 maps it, at an offset of 2^64 - 64: added to the step's size it
  // wraps to 108, which once passed as inside the one-page buffer and made
  // rank 0 read from 64 bytes before its mapping.
  Lie wrapped{"announced offset 2^64 - 64", [](ForgedStep* s) {
                const int fd = memfd_create("lying-peer", MFD_CLOEXEC);
                struct stat st {};
                if (fd < 0 || ftruncate(fd, 4096) != 0 || fstat(fd, &st) != 0) return;
                PeerAddress a;
                a.fd = fd;
                a.inode = static_cast<uint64_t>(st.st_ino);
                a.pages = 1;
                a.base = 0;  // below the step's size, so that the wrapped address is not below it
                a.address = ~uint64_t{0} - 63;
                s->meta.bytes = 43 * sizeof(int32_t);
                const char* raw = reinterpret_cast<const char*>(&a);
                s->payload.assign(raw, raw + sizeof(a));
                s->closeAfter = fd;
              }, {"single-copy read of 172 bytes", "from rank 1"}};
  wrapped.env = {{"GYRE_SINGLE_COPY", "always"}};
  runLie(Path::kShm, wrapped);
}
