// The shared-memory FIFO as the executor uses it: one segment mapped twice
// (as by two processes), the sender filling slot step % 8 and publishing
// tail, the receiver reading in place and publishing head, both sleeping on
// the shared counters (futex) when they cannot move.
#include <catch2/catch.hpp>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "src/debug/error.h"
#include "src/host/progress.h"
#include "src/host/wait.h"
#include "src/transport/shm/shm_segment.h"
#include "src/transport/shm/shm_transport.h"

namespace gyre {
namespace {

constexpr int kSender = 3;
constexpr int kReceiver = 5;

// Both ends of one connection; closes what is still open.
struct Pair {
  Connection send, recv;
  explicit Pair(size_t slotBytes) {
    REQUIRE(shmConnectLocalPair(slotBytes, kSender, kReceiver, &send, &recv) == ncclSuccess);
  }
  ~Pair() {
    if (send.state) send.transport->close(send);
    if (recv.state) recv.transport->close(recv);
  }
};

// The payload of `step`: words no other step or offset has.
uint32_t word(uint64_t step, size_t i) { return static_cast<uint32_t>(step * 2654435761u + i * 40503u + 1); }

uint32_t bytesOf(uint64_t step, size_t slotBytes) {
  return static_cast<uint32_t>(4 * (1 + (step * 7919) % (slotBytes / 4)));  // 4 .. slotBytes
}

// What the executor does after a send step.
void post(Connection& c, uint32_t bytes) {
  auto* p = reinterpret_cast<uint32_t*>(c.fifo.payload(c.step, bytes));
  for (size_t i = 0; i < bytes / 4; ++i) p[i] = word(c.step, i);
  SlotMeta m{};
  m.opCount = static_cast<uint32_t>(c.step);  // SlotMeta keeps 32 bits; count carries all 64
  m.count = ~c.step;
  m.bytes = bytes;
  m.coll = static_cast<uint8_t>(c.step);
  c.fifo.metaOf(c.step) = m;
  publishSent(c);
  c.transport->wakePeer(c);
}

// What the executor does for a receive step; "" if the step is intact.
std::string consume(Connection& c, size_t slotBytes) {
  const SlotMeta& m = c.fifo.metaOf(c.step);
  const uint32_t want = bytesOf(c.step, slotBytes);
  std::string bad;
  if (m.opCount != static_cast<uint32_t>(c.step) || m.count != ~c.step || m.bytes != want ||
      m.coll != static_cast<uint8_t>(c.step))
    bad = "step " + std::to_string(c.step) + ": meta says step " + std::to_string(m.opCount) + ", " +
          std::to_string(m.bytes) + " bytes (expected " + std::to_string(want) + ")";
  const auto* p = reinterpret_cast<const uint32_t*>(c.fifo.payload(c.step, want));
  for (size_t i = 0; bad.empty() && i < want / 4; ++i)
    if (p[i] != word(c.step, i)) bad = "step " + std::to_string(c.step) + ": word " + std::to_string(i) + " wrong";
  publishConsumed(c);
  c.transport->wakePeer(c);
  return bad;
}

// Spins a little, then sleeps on the shared counter, until `ready` holds.
template <typename Ready>
bool waitFor(Connection& c, Ready ready, double seconds = 10) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (int i = 0; !ready(); ++i) {
    if (std::chrono::steady_clock::now() > end) return false;
    if (i > 100) ProgressEngine::sleepOnShared({&c}, false, 50);
  }
  return true;
}

double threadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace

TEST_CASE("both mappings of a shared-memory segment see one FIFO: a posted step arrives intact", "[shm]") {
  Pair p(4096);
  CHECK(p.send.sharedCounters);
  CHECK_FALSE(p.send.needsProgress);
  CHECK(p.send.fifo.slots != p.recv.fifo.slots);  // two mappings, as in two processes
  CHECK_FALSE(recvDataReady(p.recv));
  post(p.send, bytesOf(0, 4096));
  REQUIRE(recvDataReady(p.recv));
  CHECK(consume(p.recv, 4096).empty());
  CHECK(sendsDrained(p.send));
}

TEST_CASE("a step of up to 32 bytes travels inside its slot's metadata line, one of up to 2 KiB in the line's payload "
          "block; a larger one in the slot", "[shm]") {
  Pair p(4096);
  REQUIRE(p.send.fifo.hasLines());
  for (uint32_t bytes : {4u, 32u, 36u, 2048u, 2052u, 4096u}) {
    INFO(bytes << " bytes");
    const bool inLine = bytes <= kLineInlineBytes;
    const bool inBlock = !inLine && bytes <= kLinePayloadBytes;
    CHECK((p.send.fifo.payload(p.send.step, bytes) == p.send.fifo.lineOf(p.send.step).payload) == inLine);
    const char* block = p.recv.fifo.linePayloads + (p.recv.step % kLinePayloadSlots) * kLinePayloadBytes;
    CHECK((p.recv.fifo.payload(p.recv.step, bytes) == block) == inBlock);
    CHECK((p.recv.fifo.payload(p.recv.step, bytes) == p.recv.fifo.slot(p.recv.step)) == (!inLine && !inBlock));
    CHECK_FALSE(recvDataReady(p.recv));
    auto* out = reinterpret_cast<uint32_t*>(p.send.fifo.payload(p.send.step, bytes));
    for (size_t i = 0; i < bytes / 4; ++i) out[i] = word(p.send.step, i);
    SlotMeta m{};
    m.bytes = bytes;
    p.send.fifo.metaOf(p.send.step) = m;
    // The receiver learns of the step from the line's sequence word alone.
    publishSent(p.send);
    REQUIRE(recvDataReady(p.recv));
    CHECK(p.recv.fifo.metaOf(p.recv.step).bytes == bytes);
    const auto* in = reinterpret_cast<const uint32_t*>(p.recv.fifo.payload(p.recv.step, bytes));
    for (size_t i = 0; i < bytes / 4; ++i) REQUIRE(in[i] == word(p.recv.step, i));
    publishConsumed(p.recv);
  }
  CHECK(sendsDrained(p.send));
}

TEST_CASE("slots wrap around: 8k+3 steps of varying size through 8 slots each land in slot step % 8 intact",
          "[shm]") {
  const size_t slotBytes = 1024;
  Pair p(slotBytes);
  const uint64_t steps = 8 * 5 + 3;
  while (p.recv.step < steps) {
    // Fill every free slot: the sender must stop at exactly kFifoSlots in flight.
    int posted = 0;
    while (p.send.step < steps && sendSlotFree(p.send)) {
      post(p.send, bytesOf(p.send.step, slotBytes));
      ++posted;
    }
    if (p.send.step < steps) REQUIRE(p.send.step - p.recv.step == uint64_t(kFifoSlots));
    REQUIRE((posted > 0 || p.send.step == steps));
    // The receiver reads the slot the sender wrote, at the same offset in its own mapping.
    const size_t offset = p.recv.fifo.slot(p.recv.step) - p.recv.fifo.slots;
    CHECK(offset == (p.recv.step % kFifoSlots) * slotBytes);
    // Consume three at a time so the sender's next round starts mid-ring.
    for (int i = 0; i < 3 && recvDataReady(p.recv); ++i) {
      INFO("step " << p.recv.step);
      REQUIRE(consume(p.recv, slotBytes).empty());
    }
  }
  CHECK(loadAcquire(p.send.fifo.tail) == steps);
  CHECK(loadAcquire(p.send.fifo.head) == steps);
}

// Steps of up to 32 bytes need only a line, so a sender may post up to
// kLineSlots of them before the receiver takes any; one of up to 2 KiB
// waits until fewer than kLinePayloadSlots are in flight, one that needs a
// slot until fewer than kFifoSlots are. Three laps of the lines, steps of 4
// bytes to 2 KiB, the receiver taking a step at a time, with a slot-sized
// step every 50th.
TEST_CASE("steps of up to 32 bytes run up to kLineSlots ahead of the receiver, of up to 2 KiB kLinePayloadSlots; a "
          "step that needs a slot waits for one",
          "[shm]") {
  const size_t slotBytes = 4096;
  Pair p(slotBytes);
  auto bytesAt = [](uint64_t step) -> uint32_t { return step % 50 == 49 ? 4096 : 4 * (1 + step * 37 % 512); };
  const uint64_t steps = 3 * kLineSlots + 5;
  while (p.recv.step < steps) {
    while (p.send.step < steps && sendSlotFree(p.send, bytesAt(p.send.step))) post(p.send, bytesAt(p.send.step));
    const uint64_t ahead = p.send.step - p.recv.step;
    if (p.send.step < steps) {
      INFO("step " << p.send.step << " of " << bytesAt(p.send.step) << " bytes, " << ahead << " ahead");
      const uint32_t bytes = bytesAt(p.send.step);
      const uint64_t depth = bytes <= kLineInlineBytes    ? uint64_t(kLineSlots)
                             : bytes <= kLinePayloadBytes ? uint64_t(kLinePayloadSlots)
                                                          : uint64_t(kFifoSlots);
      if (depth == uint64_t(kLineSlots)) REQUIRE(ahead == depth);
      else REQUIRE(ahead >= depth);
      // The sleeper's view (progress.cc) agrees: no room for the next step.
      REQUIRE(p.send.sendDepth == depth);
    }
    REQUIRE(recvDataReady(p.recv));
    const SlotMeta& m = p.recv.fifo.metaOf(p.recv.step);
    REQUIRE(m.bytes == bytesAt(p.recv.step));
    const auto* in = reinterpret_cast<const uint32_t*>(p.recv.fifo.payload(p.recv.step, m.bytes));
    for (size_t i = 0; i < m.bytes / 4; ++i) REQUIRE(in[i] == word(p.recv.step, i));
    publishConsumed(p.recv);
  }
  CHECK(loadAcquire(p.send.fifo.head) == steps);
}

TEST_CASE("when the counters' low 32 bits wrap, sleeping on them still wakes at every step", "[shm]") {
  const size_t slotBytes = 256;
  Pair p(slotBytes);
  // Start both sides just below 2^32, as after four billion steps.
  const uint64_t start = (uint64_t{1} << 32) - 5;
  ShmHeader* h = reinterpret_cast<ShmHeader*>(p.send.fifo.slots - kShmSlotsOffset);
  h->tail = h->head = start;
  p.send.step = p.recv.step = start;
  std::atomic<bool> failed{false};
  std::thread receiver([&] {
    for (int i = 0; i < 20 && !failed; ++i) {
      if (!waitFor(p.recv, [&] { return recvDataReady(p.recv); }, 5) || !consume(p.recv, slotBytes).empty())
        failed = true;
    }
  });
  for (int i = 0; i < 20 && !failed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the receiver is asleep by now
    post(p.send, bytesOf(p.send.step, slotBytes));
  }
  receiver.join();
  CHECK_FALSE(failed);
  CHECK(p.recv.step == start + 20);
}

TEST_CASE("under random sender and receiver delays every step arrives in order with its data and meta",
          "[shm][fuzz]") {
  const size_t slotBytes = GENERATE(64, 4096);
  const unsigned seed = GENERATE(1u, 2u, 3u);
  INFO("slotBytes " << slotBytes << ", seed " << seed);
  Pair p(slotBytes);
  const uint64_t steps = 3000;
  // Mostly no delay, sometimes a few microseconds (spinning), sometimes long
  // enough that the other side goes to sleep on the futex.
  auto delay = [](std::mt19937& rng) {
    unsigned r = rng() % 100;
    if (r < 70) return;
    if (r < 97) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));
    else std::this_thread::sleep_for(std::chrono::microseconds(500 + rng() % 1500));
  };
  std::string receiverError;
  std::thread receiver([&] {
    std::mt19937 rng(seed * 7 + 1);
    while (p.recv.step < steps) {
      delay(rng);
      if (!waitFor(p.recv, [&] { return recvDataReady(p.recv); })) {
        receiverError = "receiver timed out at step " + std::to_string(p.recv.step);
        return;
      }
      std::string bad = consume(p.recv, slotBytes);
      if (!bad.empty()) {
        receiverError = bad;
        return;
      }
    }
  });
  std::mt19937 rng(seed);
  bool senderOk = true;
  while (senderOk && p.send.step < steps) {
    delay(rng);
    senderOk = waitFor(p.send, [&] { return sendSlotFree(p.send); });
    if (senderOk) post(p.send, bytesOf(p.send.step, slotBytes));
  }
  receiver.join();
  CHECK(senderOk);
  CHECK(receiverError == "");
  CHECK(p.recv.step == steps);
  CHECK(loadAcquire(p.send.fifo.head) == steps);
}

TEST_CASE("a receiver blocked on an empty FIFO sleeps without using the CPU and wakes when a step comes",
          "[shm]") {
  Pair p(1024);
  std::atomic<double> cpu{0}, wokeAfter{0};
  const auto postAt = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
  std::thread receiver([&] {
    double c0 = threadCpuSeconds();
    bool ok = waitFor(p.recv, [&] { return recvDataReady(p.recv); }, 5);
    wokeAfter = ok ? std::chrono::duration<double>(std::chrono::steady_clock::now() - postAt).count() : 99;
    cpu = threadCpuSeconds() - c0;
  });
  std::this_thread::sleep_until(postAt);
  post(p.send, bytesOf(0, 1024));
  receiver.join();
  INFO("CPU " << cpu << " s while blocked 0.4 s; woke " << wokeAfter * 1e3 << " ms after the post");
  CHECK(cpu < 0.05);
  CHECK(wokeAfter < 0.025);  // woken by the post, not by the end of a 50 ms sleep slice
}

TEST_CASE("a rank blocked on two connections wakes when either one moves", "[shm]") {
  for (bool moveSecond : {true, false}) {
    INFO((moveSecond ? "a slot freed on the second" : "data on the first") << " connection");
    // The waiter wants data on a.recv or a free slot on b.send, whose FIFO is full.
    Pair a(1024), b(1024);
    for (int i = 0; i < kFifoSlots; ++i) post(b.send, bytesOf(b.send.step, 1024));
    REQUIRE_FALSE(sendSlotFree(b.send));
    std::atomic<double> woke{99};
    const auto moveAt = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    std::thread waiter([&] {
      const auto giveUp = moveAt + std::chrono::seconds(1);
      while (!recvDataReady(a.recv) && !sendSlotFree(b.send) && std::chrono::steady_clock::now() < giveUp)
        ProgressEngine::sleepOnShared({&a.recv, &b.send}, false, 1000);
      woke = std::chrono::duration<double>(std::chrono::steady_clock::now() - moveAt).count();
    });
    std::this_thread::sleep_until(moveAt);
    if (moveSecond) CHECK(consume(b.recv, 1024).empty());
    else post(a.send, bytesOf(0, 1024));
    waiter.join();
    CHECK(woke < 0.025);  // woken by the move, not by the 1 s timeout
  }
}

TEST_CASE("an abort notice through the shared header names the culprit and the reporting peer", "[shm]") {
  Pair p(1024);
  int culprit = -1;
  REQUIRE(p.recv.transport->progress(p.recv, &culprit) == ncclSuccess);
  p.send.transport->sendAbortNotice(p.send, 7);  // the sender (rank 3) failed because of rank 7
  CHECK(p.recv.transport->progress(p.recv, &culprit) == ncclRemoteError);
  CHECK(culprit == 7);
  CHECK_THAT(std::string(lastErrorText()),
             Catch::Contains("rank 7 failed") && Catch::Contains("reported by rank 3"));
  // A rank does not read its own notice as its peer's.
  culprit = -1;
  CHECK(p.send.transport->progress(p.send, &culprit) == ncclSuccess);
  // Notices go both ways: the receiver (rank 5) blames rank 1.
  p.recv.transport->sendAbortNotice(p.recv, 1);
  CHECK(p.send.transport->progress(p.send, &culprit) == ncclRemoteError);
  CHECK(culprit == 1);
  CHECK_THAT(std::string(lastErrorText()), Catch::Contains("reported by rank 5"));
}

TEST_CASE("a rank blamed by its peer's abort notice is told so, not that it failed itself", "[shm]") {
  Pair p(1024);
  p.recv.transport->sendAbortNotice(p.recv, kSender);  // e.g. the sender's call did not match
  int culprit = -1;
  CHECK(p.send.transport->progress(p.send, &culprit) == ncclRemoteError);
  CHECK(culprit == kSender);
  CHECK_THAT(std::string(lastErrorText()), Catch::Contains("rank 5 gave up on this rank (3)"));
}

TEST_CASE("an abort notice wakes a peer asleep on the FIFO", "[shm]") {
  Pair p(1024);
  std::atomic<double> woke{99};
  const auto noticeAt = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  std::thread receiver([&] {
    ProgressEngine::sleepOnShared({&p.recv}, false, 2000);
    woke = std::chrono::duration<double>(std::chrono::steady_clock::now() - noticeAt).count();
  });
  std::this_thread::sleep_until(noticeAt);
  p.send.transport->sendAbortNotice(p.send, 3);
  receiver.join();
  CHECK(woke < 0.5);
}

TEST_CASE("a closed peer: the receiver learns it, and a sender with unconsumed steps fails naming the peer",
          "[shm]") {
  SECTION("the sender closes: its steps stay readable, the receiver sees peerClosed") {
    Pair p(1024);
    post(p.send, bytesOf(0, 1024));
    p.send.transport->close(p.send);
    int culprit = -1;
    CHECK(p.recv.transport->progress(p.recv, &culprit) == ncclSuccess);
    CHECK(p.recv.peerClosed);
    REQUIRE(recvDataReady(p.recv));  // what it sent before leaving is still valid
    CHECK(consume(p.recv, 1024).empty());
  }
  SECTION("the receiver closes after consuming everything: not an error") {
    Pair p(1024);
    post(p.send, bytesOf(0, 1024));
    CHECK(consume(p.recv, 1024).empty());
    p.recv.transport->close(p.recv);
    int culprit = -1;
    CHECK(p.send.transport->progress(p.send, &culprit) == ncclSuccess);
    CHECK(p.send.peerClosed);
  }
  SECTION("the receiver closes with steps unconsumed: the sender fails and blames it") {
    Pair p(1024);
    post(p.send, bytesOf(0, 1024));
    post(p.send, bytesOf(1, 1024));
    p.recv.transport->close(p.recv);
    int culprit = -1;
    CHECK(p.send.transport->progress(p.send, &culprit) == ncclRemoteError);
    CHECK(culprit == kReceiver);
    CHECK_THAT(std::string(lastErrorText()), Catch::Contains("rank 5") && Catch::Contains("2 steps unconsumed"));
  }
}

}  // namespace gyre
