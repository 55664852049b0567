// NCCL's low-latency all-to-all (ncclLLA2ASession) and LSA barriers made by
// ncclLsaBarrierCreateRequirement, on the fake CUDA runtime. As in
// device_api_test.cc a "kernel" is host threads running the header's
// __host__ __device__ code: here every block is 3 threads whose group
// (HostCta) really synchronises, so the session's ordering between one
// round's reads and the next round's sends is exercised. Every value
// received is checked against an independent reference (a hash of seed,
// sender, receiver, block, round and element), for element counts 1, 13
// (prime) and the maximum, over several rounds and sessions on the same
// buffers, and across the 32-bit epoch wrap.
#define GYRE_LL_A2A_TIMEOUT_NS 30000000000ull  // a broken test fails in 30 s, inside the test's timeout

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "coll_common.h"
#include "include/nccl_device.h"

namespace {

using namespace gyre::test;

RankOptions apiOptions() {
  RankOptions o;
  o.timeout_s = 180;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "20"}, {"GYRE_INIT_TIMEOUT", "20"}};
  return o;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// What rank `from` sends rank `to` as element i of round `round` in block
// `block` (to = -1: what it broadcasts to all).
uint64_t a2aValue(uint64_t seed, int from, int to, int block, int round, int i) {
  return mix(seed ^ mix((uint64_t(from + 1) << 48) ^ (uint64_t(to + 1) << 40) ^ (uint64_t(block) << 32) ^
                        (uint64_t(round) << 16) ^ uint64_t(i)));
}
// A float that sums exactly: eighths of small integers.
float a2aFloat(uint64_t seed, int from, int block, int round, int i) {
  return float(int64_t(a2aValue(seed, from, -2, block, round, i) % 20001u) - 10000) / 8.0f;
}

// 20 bytes: three lines, the last one half padding.
struct Wide {
  uint32_t w[5];
  bool operator==(const Wide& o) const { return memcmp(w, o.w, sizeof w) == 0; }
};
Wide wideValue(uint64_t seed, int from, int to, int block, int round, int i) {
  Wide v;
  for (int k = 0; k < 5; ++k) v.w[k] = uint32_t(a2aValue(seed, from, to, block, round, i * 8 + k));
  return v;
}

// A block of host threads as a device group: sync() is a real barrier.
struct HostCta {
  std::barrier<>* bar;
  int t, n;
  int thread_rank() const { return t; }
  int size() const { return n; }
  int num_threads() const { return n; }
  void sync() { bar->arrive_and_wait(); }
};

constexpr int kPerPeer = 16;  // the most elements a rank sends each peer in a round
constexpr int kBlocks = 3;
constexpr int kThreads = 3;
constexpr int kSessions = 3, kRoundsPerSession = 4;  // every (count, mode) pair once
const int kCounts[3] = {1, 13, kPerPeer};

struct Failure {
  std::string text;
  void note(const std::string& s) {
    if (text.empty()) text = s;
  }
};

// One thread of block `block`: kSessions sessions (as kernel launches) of
// kRoundsPerSession rounds. Round r sends count kCounts[r % 3] elements to
// every peer, by mode r % 4: uint64 send/recv, Wide send/recvUnrolled,
// float send/recvReduce (sum over senders), uint64 bcast/recv. Thread t
// takes every kThreads'th element. Mismatches are noted, never returned
// early, so no peer is left waiting.
void a2aThread(const ncclDevComm& dev, ncclLLA2AHandle h, int block, HostCta cta, uint64_t seed, Failure* bad) {
  const ncclTeam team = ncclTeamLsa(dev);
  const int me = team.rank, n = team.nRanks, maxElts = n * kPerPeer;
  auto where = [&](int round, const char* what, int from, int i) {
    return "block " + std::to_string(block) + " round " + std::to_string(round) + " " + what + ": element " +
           std::to_string(i) + " from rank " + std::to_string(from);
  };
  for (int session = 0; session < kSessions; ++session) {
    ncclLLA2ASession<HostCta> s{cta, dev, team, h, uint32_t(block), maxElts};
    for (int k = 0; k < kRoundsPerSession; ++k) {
      const int round = session * kRoundsPerSession + k, c = kCounts[round % 3];
      switch (round % 4) {
        case 0:
          for (int i = cta.t; i < c; i += cta.n)
            for (int p = 0; p < n; ++p) s.send(p, me * kPerPeer + i, a2aValue(seed, me, p, block, round, i));
          for (int j = cta.t; j < n * c; j += cta.n) {
            const int from = j / c, i = j % c;
            if (s.recv<uint64_t>(from * kPerPeer + i) != a2aValue(seed, from, me, block, round, i))
              bad->note(where(round, "recv", from, i));
          }
          break;
        case 1: {
          for (int i = cta.t; i < c; i += cta.n)
            for (int p = 0; p < n; ++p) s.send(p, me * kPerPeer + i, wideValue(seed, me, p, block, round, i));
          constexpr int kChunk = 4;
          const int chunks = (c + kChunk - 1) / kChunk;
          for (int j = cta.t; j < n * chunks; j += cta.n) {
            const int from = j / chunks, i0 = (j % chunks) * kChunk, m = std::min(kChunk, c - i0);
            Wide got[kChunk];
            s.recvUnrolled<1, kChunk>(from * kPerPeer + i0, m, 1, got);
            for (int u = 0; u < m; ++u)
              if (!(got[u] == wideValue(seed, from, me, block, round, i0 + u)))
                bad->note(where(round, "recvUnrolled", from, i0 + u));
          }
          break;
        }
        case 2:
          for (int i = cta.t; i < c; i += cta.n)
            for (int p = 0; p < n; ++p) s.send(p, me * kPerPeer + i, a2aFloat(seed, me, block, round, i));
          for (int i = cta.t; i < c; i += cta.n) {
            double want = 0;
            for (int from = 0; from < n; ++from) want += a2aFloat(seed, from, block, round, i);
            const double got = s.recvReduce<4, float>(i, n, kPerPeer, [](float x) { return double(x); },
                                                       [](double a, double b) { return a + b; });
            if (got != want) bad->note(where(round, "recvReduce (sum over senders)", -1, i));
          }
          break;
        default:
          for (int i = cta.t; i < c; i += cta.n) s.bcast(me * kPerPeer + i, a2aValue(seed, me, -1, block, round, i));
          for (int j = cta.t; j < n * c; j += cta.n) {
            const int from = j / c, i = j % c;
            if (s.recv<uint64_t>(from * kPerPeer + i) != a2aValue(seed, from, -1, block, round, i))
              bad->note(where(round, "bcast", from, i));
          }
      }
      s.endEpoch(cta);
    }
  }
}

// The block's control word (its next epoch) and its two halves of slots,
// as nccl_device/ll_a2a.h lays them out.
uint32_t* controlWord(const ncclDevComm& dev, ncclLLA2AHandle h, int block) {
  auto* lines = static_cast<gyre_device::LLLine*>(ncclGetResourceBufferLocalPointer(dev, h.bufHandle));
  return &lines[size_t(block) * gyre_device::llA2ABlockLines(h.nSlots)].lo;
}
gyre_device::LLLine* half(const ncclDevComm& dev, ncclLLA2AHandle h, int block, int which) {
  auto* lines = static_cast<gyre_device::LLLine*>(ncclGetResourceBufferLocalPointer(dev, h.bufHandle));
  return lines + size_t(block) * gyre_device::llA2ABlockLines(h.nSlots) + 1 + size_t(which) * h.nSlots;
}

// Rounds across the epoch wrap (0xFFFFFFFD .. 4) on one block, whose slots
// hold stale lines flagged with the epochs after the wrap (2 and 3) and
// garbage. Rank 0 waits before sending in rounds 2 and 3, so a peer that
// took a stale line would take it before rank 0's value arrives.
std::string acrossTheWrap(const ncclDevComm& dev, ncclLLA2AHandle h, ncclLsaBarrierHandle bars, uint64_t seed) {
  const ncclTeam team = ncclTeamLsa(dev);
  const int me = team.rank, n = team.nRanks, maxElts = n * kPerPeer;
  *controlWord(dev, h, 0) = 0xFFFFFFFDu;
  for (int which = 0; which < 2; ++which)
    for (uint32_t i = 0; i < h.nSlots; ++i)
      half(dev, h, 0, which)[i] = {0xdead0000u + i, 2u + which, 0xbeefu, 2u + which};
  {
    ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dev, team, bars, 0};
    if (bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, 20ull * 1000 * 1000 * 1000) != ncclSuccess)
      return "wrap: the barrier after planting stale lines timed out";
  }
  std::barrier<> one(1);
  HostCta cta{&one, 0, 1};
  Failure bad;
  const uint32_t epochs[] = {0xFFFFFFFDu, 0xFFFFFFFEu, 0xFFFFFFFFu, 2u, 3u, 4u};
  {
    ncclLLA2ASession<HostCta> s{cta, dev, team, h, 0, maxElts};
    for (int k = 0; k < 6; ++k) {
      const int round = 100 + k, c = epochs[k] < 0xFFFFFFFDu ? kPerPeer : 1;
      if (me == 0 && (epochs[k] == 2u || epochs[k] == 3u)) std::this_thread::sleep_for(std::chrono::milliseconds(30));
      for (int i = 0; i < c; ++i)
        for (int p = 0; p < n; ++p) s.send(p, me * kPerPeer + i, a2aValue(seed, me, p, 9, round, i));
      for (int from = 0; from < n; ++from)
        for (int i = c - 1; i >= 0; --i)  // slots before the wrap last wrote first: they hold the stale lines
          if (s.recv<uint64_t>(from * kPerPeer + i) != a2aValue(seed, from, me, 9, round, i))
            bad.note("wrap: epoch " + std::to_string(epochs[k]) + ": element " + std::to_string(i) + " from rank " +
                     std::to_string(from) + " is not what it sent");
      s.endEpoch(cta);
    }
  }
  if (!bad.text.empty()) return bad.text;
  if (*controlWord(dev, h, 0) != 5u)
    return "wrap: the block's next epoch is " + std::to_string(*controlWord(dev, h, 0)) + ", not 5";
  return "";
}

constexpr size_t kBarrierWords = 257;  // prime

// Barriers from ncclLsaBarrierCreateRequirement: over the LSA team
// (barrier 1 of `all`) and over pairs of ranks (`pairs`): each round every
// rank writes its words of `data`, meets its team, reads every team peer's,
// and meets again before the next round's writes.
std::string barrierRounds(const ncclDevComm& dev, ncclLsaBarrierHandle all, ncclTeam pairTeam,
                          ncclLsaBarrierHandle pairs, ncclDevResourceHandle data, uint64_t seed) {
  const ncclTeam lsa = ncclTeamLsa(dev);
  constexpr uint64_t kTimeout = 20ull * 1000 * 1000 * 1000;
  auto* mine = static_cast<uint32_t*>(ncclGetResourceBufferLocalPointer(dev, data));
  for (int round = 0; round < 20; ++round) {
    const bool pairRound = round % 2 == 1;
    const ncclTeam team = pairRound ? pairTeam : lsa;
    ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dev, team, pairRound ? pairs : all, pairRound ? 0u : 1u};
    for (size_t i = 0; i < kBarrierWords; ++i) mine[i] = uint32_t(a2aValue(seed, dev.rank, -3, 0, round, int(i)));
    if (bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, kTimeout) != ncclSuccess)
      return "barrier round " + std::to_string(round) + " timed out";
    for (int p = 0; p < team.nRanks; ++p) {
      const int world = ncclTeamRankToWorld(dev, team, p);
      auto* theirs = static_cast<const uint32_t*>(
          ncclGetResourceBufferPeerPointer(dev, data, ncclTeamWorld(dev), world));
      for (size_t i = 0; i < kBarrierWords; ++i)
        if (theirs[i] != uint32_t(a2aValue(seed, world, -3, 0, round, int(i))))
          return "barrier round " + std::to_string(round) + ": word " + std::to_string(i) + " of rank " +
                 std::to_string(world) + " read before it was written";
    }
    if (bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, kTimeout) != ncclSuccess)
      return "closing barrier of round " + std::to_string(round) + " timed out";
  }
  return "";
}

// One rank: a device communicator holding an LL all-to-all of kBlocks
// blocks, one of a block for the wrap, barriers over the LSA team and over
// pairs, and a data buffer; the all-to-all kernel, the barriers, the wrap.
std::string llA2ARank(ncclComm_t comm, uint64_t seed) {
  int nRanks = 0;
  ncclCommCount(comm, &nRanks);
  const int maxElts = nRanks * kPerPeer;
  const int nSlots = ncclLLA2ACalcSlots(maxElts, sizeof(Wide));
  if (nSlots != maxElts * 3) return "ncclLLA2ACalcSlots: " + std::to_string(nSlots) + " slots for 20-byte values";
  ncclLLA2AHandle h, wrap;
  ncclDevResourceRequirements_t llReq, wrapReq, allReq, pairReq, dataReq = {};
  if (ncclLLA2ACreateRequirement(kBlocks, nSlots, &h, &llReq) != ncclSuccess ||
      ncclLLA2ACreateRequirement(1, ncclLLA2ACalcSlots(maxElts, 8), &wrap, &wrapReq) != ncclSuccess)
    return std::string("ncclLLA2ACreateRequirement: ") + ncclGetLastError(nullptr);
  if (llReq.bufferSize != size_t(kBlocks) * (1 + 2 * size_t(nSlots)) * 16 || llReq.bufferAlign != 16 ||
      llReq.outBufferHandle != &h.bufHandle || h.nSlots != uint32_t(nSlots))
    return "ncclLLA2ACreateRequirement's requirement is not kBlocks x (1 + 2 x nSlots) lines of 16 bytes";
  const ncclTeam lsa = ncclTeamLsa(comm), pairTeam = ncclTeamInnerFactor(lsa, 2);
  ncclLsaBarrierHandle all, pairs;
  if (ncclLsaBarrierCreateRequirement(lsa, 2, &all, &allReq) != ncclSuccess ||
      ncclLsaBarrierCreateRequirement(pairTeam, 1, &pairs, &pairReq) != ncclSuccess)
    return std::string("ncclLsaBarrierCreateRequirement: ") + ncclGetLastError(nullptr);
  if (allReq.bufferSize != 4 * 2 * size_t(1 + nRanks) || all.nBarriers != 2 || pairReq.bufferSize != 4 * 3)
    return "ncclLsaBarrierCreateRequirement's sizes";
  ncclDevResourceHandle data = 0;
  dataReq.bufferSize = kBarrierWords * 4;
  dataReq.outBufferHandle = &data;
  llReq.next = &wrapReq;
  wrapReq.next = &allReq;
  allReq.next = &pairReq;
  pairReq.next = &dataReq;
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.resourceRequirementsList = &llReq;
  reqs.lsaLLA2ABlockCount = 2;  // reserves nothing, as in NCCL; accepted
  reqs.lsaLLA2ASlotCount = 8;
  ncclDevComm dev;
  if (ncclDevCommCreate(comm, &reqs, &dev) != ncclSuccess)
    return std::string("ncclDevCommCreate: ") + ncclGetLastError(nullptr);
  if (ncclGetResourceBufferOffset(h.bufHandle) % 16 != 0 || h.bufHandle == wrap.bufHandle ||
      all.bufHandle == pairs.bufHandle)
    return "the requirements' handles were not filled";

  Failure bad[kBlocks];
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<std::barrier<>>> ctas;
  for (int b = 0; b < kBlocks; ++b) ctas.push_back(std::make_unique<std::barrier<>>(kThreads));
  for (int b = 0; b < kBlocks; ++b)
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, b, t] {
        Failure mine;
        a2aThread(dev, h, b, HostCta{ctas[b].get(), t, kThreads}, seed, &mine);
        static std::mutex m;
        std::lock_guard<std::mutex> lock(m);
        bad[b].note(mine.text);
      });
  for (auto& t : threads) t.join();
  std::string wrong;
  for (int b = 0; b < kBlocks && wrong.empty(); ++b) wrong = bad[b].text;
  for (int b = 0; b < kBlocks && wrong.empty(); ++b)
    if (*controlWord(dev, h, b) != 1u + kSessions * kRoundsPerSession)
      wrong = "block " + std::to_string(b) + " did not keep its epoch across sessions";
  if (wrong.empty()) wrong = barrierRounds(dev, all, pairTeam, pairs, data, seed);
  if (wrong.empty()) wrong = acrossTheWrap(dev, wrap, all, seed);
  if (ncclDevCommDestroy(comm, &dev) != ncclSuccess && wrong.empty())
    wrong = std::string("ncclDevCommDestroy: ") + ncclGetLastError(nullptr);
  return wrong;
}

uint64_t freshSeed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

int llA2AOnRanks(int n) {
  std::vector<int> devs(n, 0);
  std::vector<ncclComm_t> comms(n);
  RANK_CHECK(ncclCommInitAll(comms.data(), n, devs.data()) == ncclSuccess, "init: %s", lastError().c_str());
  const uint64_t seed = freshSeed();
  std::vector<std::string> outcome(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { outcome[r] = llA2ARank(comms[r], seed); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    RANK_CHECK(outcome[r].empty(), "rank %d (seed %llu): %s", r, (unsigned long long)seed, outcome[r].c_str());
  for (int r = 0; r < n; ++r) RANK_CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy: %s", lastError().c_str());
  return 0;
}

int llA2AProcessRank(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm;
  RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
  uint64_t seed = 0;  // the same on every rank, new every run: from the id
  for (size_t i = 0; i < sizeof id.internal; ++i) seed = mix(seed ^ uint8_t(id.internal[i]));
  const std::string wrong = llA2ARank(comm, seed);
  RANK_CHECK(wrong.empty(), "seed %llu: %s", (unsigned long long)seed, wrong.c_str());
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
  return 0;
}

bool says(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

// Runs `misuse` in a child process and returns what it printed, or why it
// did not stop with a trap within 20 s.
template <typename Fn>
std::string trapsWith(Fn misuse) {
  fflush(stdout);
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    misuse();
    printf("returned without a trap\n");
    fflush(stdout);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      const ssize_t got = read(fds[0], buf, sizeof buf);
      if (got <= 0) break;
      out.append(buf, size_t(got));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      out += " [no trap within 20 s]";
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFSIGNALED(status) || (WTERMSIG(status) != SIGTRAP && WTERMSIG(status) != SIGILL))
    out += " [did not stop with a trap]";
  return out;
}

int badInput() {
  // Host side: each refusal names the argument.
  ncclLLA2AHandle h;
  ncclDevResourceRequirements_t req;
  RANK_CHECK(ncclLLA2ACreateRequirement(0, 8, &h, &req) == ncclInvalidArgument && says(lastError(), "nBlocks is 0"),
             "zero blocks: %s", lastError().c_str());
  RANK_CHECK(ncclLLA2ACreateRequirement(2, 0, &h, &req) == ncclInvalidArgument && says(lastError(), "nSlots is 0"),
             "zero slots: %s", lastError().c_str());
  RANK_CHECK(ncclLLA2ACreateRequirement(2, 8, nullptr, &req) == ncclInvalidArgument && says(lastError(), "outHandle"),
             "no handle: %s", lastError().c_str());
  RANK_CHECK(ncclLLA2ACalcSlots(-1, 8) == -1 && says(lastError(), "maxElts -1"), "%s", lastError().c_str());
  RANK_CHECK(ncclLLA2ACalcSlots(4, 0) == -1 && says(lastError(), "maxEltSize 0"), "%s", lastError().c_str());
  RANK_CHECK(ncclLLA2ACalcSlots(1 << 30, 64) == -1 && says(lastError(), "more than an int"), "%s", lastError().c_str());
  RANK_CHECK(ncclLLA2ACalcSlots(0, 8) == 0 && ncclLLA2ACalcSlots(5, 1) == 5 && ncclLLA2ACalcSlots(5, 9) == 10,
             "ncclLLA2ACalcSlots: elements x ceil(size / 8)");
  ncclLsaBarrierHandle bh;
  RANK_CHECK(ncclLsaBarrierCreateRequirement(ncclTeam{0, 0, 1}, 1, &bh, &req) == ncclInvalidArgument &&
                 says(lastError(), "is not a team"), "%s", lastError().c_str());
  RANK_CHECK(ncclLsaBarrierCreateRequirement(ncclTeam{2, 0, 1}, -1, &bh, &req) == ncclInvalidArgument &&
                 says(lastError(), "nBarriers is -1"), "%s", lastError().c_str());

  // Device side: misuse stops the kernel with a message. Two device
  // communicators of one rank: A holds an LL buffer of 2 blocks x 8 slots
  // (uint64 values), B a large buffer and then its own LL buffer.
  int dev0 = 0;
  ncclComm_t comm;
  RANK_CHECK(ncclCommInitAll(&comm, 1, &dev0) == ncclSuccess, "init: %s", lastError().c_str());
  ncclLLA2AHandle ha, hb;
  ncclDevResourceRequirements_t ra, rb, big = {};
  RANK_CHECK(ncclLLA2ACreateRequirement(2, 8, &ha, &ra) == ncclSuccess, "requirement");
  RANK_CHECK(ncclLLA2ACreateRequirement(1, 8, &hb, &rb) == ncclSuccess, "requirement");
  big.bufferSize = 1 << 16;
  big.next = &rb;
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclDevComm a, b;
  reqs.resourceRequirementsList = &ra;
  RANK_CHECK(ncclDevCommCreate(comm, &reqs, &a) == ncclSuccess, "create A: %s", lastError().c_str());
  reqs.resourceRequirementsList = &big;
  RANK_CHECK(ncclDevCommCreate(comm, &reqs, &b) == ncclSuccess, "create B: %s", lastError().c_str());
  const ncclTeam lsa = ncclTeamLsa(a);
  std::string out;
  out = trapsWith([&] { ncclLLA2ASession<ncclCoopCta> s{ncclCoopCta(), a, lsa, ha, 0, 9}; });
  RANK_CHECK(says(out, "maxElts must be 1 .. the handle's nSlots (9, 8)") && !says(out, "[did"), "maxElts: %s",
             out.c_str());
  out = trapsWith([&] {
    ncclLLA2ASession<ncclCoopCta> s{ncclCoopCta(), a, lsa, ha, 0, 8};
    s.send(0, 8, uint64_t(1));
  });
  RANK_CHECK(says(out, "slot outside 0 .. maxElts - 1 (8, 8)") && !says(out, "[did"), "slot: %s", out.c_str());
  out = trapsWith([&] {
    ncclLLA2ASession<ncclCoopCta> s{ncclCoopCta(), a, lsa, ha, 0, 8};
    s.send(0, 0, Wide{});
  });
  RANK_CHECK(says(out, "need more slots than the handle has") && says(out, "(20, 8)") && !says(out, "[did"),
             "value size: %s", out.c_str());
  out = trapsWith([&] { ncclLLA2ASession<ncclCoopCta> s{ncclCoopCta(), a, lsa, ha, 2, 8}; });
  RANK_CHECK(says(out, "the block lies outside this device communicator's resources") && says(out, ") (2, ") &&
                 !says(out, "[did"), "block: %s", out.c_str());
  out = trapsWith([&] { ncclLLA2ASession<ncclCoopCta> s{ncclCoopCta(), a, lsa, hb, 0, 8}; });
  RANK_CHECK(says(out, "a handle of another device communicator") && !says(out, "[did"), "handle of B: %s",
             out.c_str());
  out = trapsWith([&] {
    ncclLLA2ASession<ncclCoopCta> s{ncclCoopCta(), a, lsa, ha, 0, 8, /*multimem=*/true};
    s.bcast(0, uint64_t(1));
  });
  RANK_CHECK(says(out, "multimem") && !says(out, "[did"), "multimem bcast: %s", out.c_str());
  // A session made with multimem still sends and receives by unicast.
  {
    ncclLLA2ASession<ncclCoopCta> s{ncclCoopCta(), a, lsa, ha, 1, 8, /*multimem=*/true};
    s.send(0, 3, uint64_t(0x1234567890abcdefull));
    RANK_CHECK(s.recv<uint64_t>(3) == 0x1234567890abcdefull, "a one-rank send/recv");
    s.endEpoch(ncclCoopCta());
  }
  RANK_CHECK(ncclDevCommDestroy(comm, &a) == ncclSuccess && ncclDevCommDestroy(comm, &b) == ncclSuccess, "destroy");
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
  return 0;
}

}  // namespace

TEST_CASE("LL all-to-all between 2 ranks of one process equals a reference over counts 1, 13 and the maximum, "
          "rounds, sessions, blocks and the epoch wrap; LSA barriers from ncclLsaBarrierCreateRequirement",
          "[device][device_api][ll_a2a]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return llA2AOnRanks(2); }, apiOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("LL all-to-all between 4 ranks of one process, and barriers over the LSA team and over pairs",
          "[device][device_api][ll_a2a]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return llA2AOnRanks(4); }, apiOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("LL all-to-all between ranks in two processes through CUDA IPC-mapped resources",
          "[device][device_api][ll_a2a]") {
  // The fake runs both processes' device code at once, as MPS would.
  RankOptions o = apiOptions();
  o.env.push_back({"GYRE_DEVICE_API_SHARED_GPU", "1"});
  RunResult result = runRanks(2, llA2AProcessRank, o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("bad LL all-to-all and barrier requirements are refused by name; misuse of a session stops it with a "
          "message", "[device][device_api][ll_a2a]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return badInput(); }, apiOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}
