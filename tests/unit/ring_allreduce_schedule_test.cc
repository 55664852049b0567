// Runs every rank's ring AllReduce schedule in a symbolic simulator: messages
// carry, per element, the set of ranks whose input it contains and how many
// times post() was applied. Independent of the executor and transports.
#include <catch2/catch.hpp>

#include <deque>
#include <vector>

#include "src/sched/build_ring_allreduce.h"
#include "src/sched/chunking.h"
#include "src/transport/fifo.h"

using namespace gyre;

namespace {

struct Value {
  uint64_t ranks = 0;  // bit r: rank r's input is included
  int posts = 0;       // times post() was applied
  int pres = 0;        // times pre() was applied in total
};
using Message = std::vector<Value>;

struct RankState {
  ChannelSchedule sched;
  size_t pc = 0;
  std::vector<Value> output;
  std::deque<Message> inbox;  // from the previous rank
};

// Returns false on deadlock. Each inbox holds at most `capacity` messages.
bool simulate(int n, size_t count, size_t chunk, size_t align, size_t capacity, std::vector<RankState>* out) {
  std::vector<RankState>& ranks = *out;
  ranks.assign(n, {});
  for (int r = 0; r < n; ++r) {
    buildRingAllReduce({r, n, 0, count, chunk, align}, &ranks[r].sched);
    ranks[r].output.assign(count, {});
  }
  auto input = [](int r, const Step& s, size_t i) {
    Value v{uint64_t{1} << r, 0, 0};
    (void)i;
    if (s.flags & kStepPreOp) v.pres = 1;
    return v;
  };
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int r = 0; r < n; ++r) {
      RankState& me = ranks[r];
      RankState& next = ranks[(r + 1) % n];
      while (me.pc < me.sched.steps.size()) {
        const Step& s = me.sched.steps[me.pc];
        if (stepReceives(s.kind) && me.inbox.empty()) break;
        if (stepSends(s.kind) && next.inbox.size() >= capacity) break;
        Message received;
        if (stepReceives(s.kind)) {
          received = me.inbox.front();
          me.inbox.pop_front();
          REQUIRE(received.size() == s.count);
        }
        Message sent(s.count);
        for (size_t i = 0; i < s.count; ++i) {
          Value v;
          switch (s.kind) {
            case StepKind::Copy:
            case StepKind::Send: v = input(r, s, s.srcOffset + i); break;
            case StepKind::Recv:
            case StepKind::RecvCopySend: v = received[i]; break;
            default: {
              Value local = input(r, s, s.srcOffset + i);
              REQUIRE((received[i].ranks & local.ranks) == 0);  // each rank contributes once
              v = {received[i].ranks | local.ranks, received[i].posts, received[i].pres + local.pres};
            }
          }
          if (s.flags & kStepPostOp) v.posts++;
          sent[i] = v;
          if (s.kind != StepKind::Send && s.kind != StepKind::RecvReduceSend) me.output[s.dstOffset + i] = v;
        }
        if (stepSends(s.kind)) next.inbox.push_back(sent);
        me.pc++;
        progressed = true;
      }
    }
  }
  for (const RankState& rs : ranks)
    if (rs.pc != rs.sched.steps.size() || !rs.inbox.empty()) return false;
  return true;
}

}  // namespace

TEST_CASE("ring allreduce schedules give every rank every input exactly once, post() once") {
  for (int n : {1, 2, 3, 4, 5, 8})
    for (size_t count : {1, 2, 7, 13, 31, 100, 1021, 4099}) {
      size_t chunk = 16, align = 4;
      std::vector<RankState> ranks;
      INFO("nranks " << n << " count " << count);
      REQUIRE(simulate(n, count, chunk, align, kFifoSlots, &ranks));
      uint64_t all = n == 64 ? ~0ull : (uint64_t{1} << n) - 1;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) {
          const Value& v = ranks[r].output[i];
          REQUIRE(v.ranks == all);
          REQUIRE(v.posts == 1);
          REQUIRE(v.pres == n);
        }
    }
}

// A rank holds its received slot while it waits for a send slot, so with one
// slot per connection a full ring can lock up; each rank adds at most one
// message to the ring before it removes one, so two slots must be enough.
// kFifoSlots is 8, leaving room for pipelining.
TEST_CASE("ring allreduce does not deadlock with only two FIFO slots per connection") {
  for (int n : {2, 3, 4})
    for (size_t count : {1, 64, 1000}) {
      std::vector<RankState> ranks;
      CHECK(simulate(n, count, 8, 2, 2, &ranks));
    }
}

TEST_CASE("every ring allreduce step fits one chunk and no step is empty") {
  for (int n : {2, 3, 4})
    for (size_t count : {5, 77, 4096, 100000}) {
      ChannelSchedule s;
      size_t chunk = chunkElements(4096, 4);
      buildRingAllReduce({1 % n, n, 0, count, chunk, alignElements(4)}, &s);
      for (const Step& st : s.steps) {
        CHECK(st.count > 0);
        CHECK(st.count <= chunk);
      }
    }
}

TEST_CASE("an allreduce of zero elements has no steps") {
  ChannelSchedule s;
  buildRingAllReduce({0, 3, 0, 0, 16, 4}, &s);
  CHECK(s.steps.empty());
}
