// The torch backend's CUDA path without torch and without a GPU: the group's
// device communicator (python/csrc/device/device_comm.h) and stream-ordered
// work (stream_work.h) over gyre's fake CUDA runtime (GYRE_FAKE_CUDA=1: host
// memory stands in for device memory, each stream is a host thread running
// its work in order). The torch glue that calls these (cuda_ops.cc) needs a
// CUDA torch and is only compiled here.
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../support/fork_ranks.h"
#include "../support/stream_gate.h"
#include "device/device_comm.h"
#include "device/stream_work.h"
#include "src/device/runtime/runtime.h"

namespace {

using namespace gyre::test;
namespace dev = torch_gyre::device;

// StreamOps over gyre's own runtime adapter, which GYRE_FAKE_CUDA=1 makes the
// fake: the same streams and events the library's device communicators use.
class FakeStreamOps final : public dev::StreamOps {
 public:
  int currentDevice() override {
    int d = -1;
    ok(rt()->currentDevice(&d), "currentDevice");
    return d;
  }
  void setDevice(int device) override { ok(rt()->setDevice(device), "setDevice"); }
  dev::Stream createStream() override {
    dev::Stream s = nullptr;
    ok(rt()->streamCreate(&s), "streamCreate");
    return s;
  }
  void destroyStream(dev::Stream s) override { rt()->streamDestroy(s); }
  dev::Event createEvent() override {
    dev::Event e = nullptr;
    ok(rt()->eventCreate(&e), "eventCreate");
    return e;
  }
  void destroyEvent(dev::Event e) override { rt()->eventDestroy(e); }
  void record(dev::Event e, dev::Stream s) override { ok(rt()->eventRecord(e, s), "eventRecord"); }
  void streamWait(dev::Stream s, dev::Event e) override { ok(rt()->streamWaitEvent(s, e), "streamWaitEvent"); }
  bool query(dev::Event e) override {
    bool done = false;
    ok(rt()->eventQuery(e, &done), "eventQuery");
    return done;
  }

 private:
  static gyre::DeviceRuntime* rt() { return gyre::deviceRuntime(); }
  static void ok(ncclResult_t r, const char* call) {
    if (r != ncclSuccess) throw std::runtime_error(std::string("fake runtime: ") + call + ": " + lastError());
  }
};

RankOptions fakeOptions(int gyreTimeout = 10) {
  RankOptions o;
  o.timeout_s = 90;
  o.env = {{"GYRE_FAKE_CUDA", "1"},
           {"GYRE_TIMEOUT", std::to_string(gyreTimeout)},
           {"GYRE_INIT_TIMEOUT", "20"},
           {"NCCL_SOCKET_IFNAME", "lo"}};
  return o;
}

// Rank r's input: reproducible from (r, count), so every rank can compute
// the others' and the exact reference sum.
std::vector<float> inputOf(int rank, size_t count) {
  std::mt19937 gen(static_cast<unsigned>(1000 * rank + count));
  std::uniform_int_distribution<int> dist(-1000, 1000);
  std::vector<float> v(count);
  for (float& x : v) x = static_cast<float>(dist(gen)) / 8;  // exact in float: sums of a few are exact
  return v;
}

std::vector<float> sumOf(const std::vector<int>& ranks, size_t count) {
  std::vector<double> s(count, 0);
  for (int r : ranks) {
    std::vector<float> in = inputOf(r, count);
    for (size_t i = 0; i < count; ++i) s[i] += in[i];
  }
  return std::vector<float>(s.begin(), s.end());
}

dev::DeviceComm::IdExchange inheritedId(const ncclUniqueId& id) {
  return [id] { return id; };
}

// A copy of a buffer taken by a host function on a stream: what a kernel
// enqueued on that stream would read.
struct Snapshot {
  const std::vector<float>* from;
  std::vector<float> seen;
  static void take(void* self) {
    auto* s = static_cast<Snapshot*>(self);
    s->seen = *s->from;
  }
};

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("a group's all-reduce runs after the caller's stream and the caller's stream waits for it", "[torch][device]") {
  RunResult run = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    FakeStreamOps ops;
    auto commPtr = std::make_shared<dev::DeviceComm>(ops, rank, nranks, 30, inheritedId(id));
    dev::DeviceComm& comm = *commPtr;
    gyre::DeviceRuntime* rt = gyre::deviceRuntime();
    dev::Stream caller = ops.createStream(), after = ops.createStream();
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1009), size_t(65537)}) {
      rankProgress("count " + std::to_string(count));
      const std::vector<float> input = inputOf(rank, count);
      std::vector<float> buf = input;
      StreamGate gate;  // the caller's earlier work, still running
      RANK_CHECK(rt->hostFunc(caller, &StreamGate::wait, &gate) == ncclSuccess, "hostFunc: %s", lastError().c_str());
      auto work = dev::StreamWork::launch(commPtr, 0, caller, "all_reduce", [&](ncclComm_t c, dev::Stream s) {
        comm.check(ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, c, s), "ncclAllReduce");
      });
      auto held = std::make_shared<int>(1);
      std::weak_ptr<int> heldWeak = held;
      work->hold(std::move(held));
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      RANK_CHECK(!work->isCompleted(), "rank %d count %zu: completed while the caller's stream was held", rank, count);
      RANK_CHECK(buf == input, "rank %d count %zu: the buffer changed before the caller's stream reached the call",
                 rank, count);
      RANK_CHECK(!heldWeak.expired(), "rank %d: what the work holds was released before its end", rank);
      // What `after` runs once it waits for the work sees the result.
      Snapshot snap{&buf, {}};
      work->blockStream(after);
      RANK_CHECK(rt->hostFunc(after, &Snapshot::take, &snap) == ncclSuccess, "hostFunc: %s", lastError().c_str());
      gate.open = true;
      work->synchronize(std::chrono::seconds(30));
      RANK_CHECK(rt->streamSynchronize(after) == ncclSuccess, "streamSynchronize: %s", lastError().c_str());
      RANK_CHECK(heldWeak.expired(), "rank %d: what the work holds outlived its end", rank);
      const std::vector<float> want = sumOf({0, 1}, count);
      RANK_CHECK(buf == want, "rank %d count %zu: all-reduce result differs from the exact sum", rank, count);
      RANK_CHECK(snap.seen == want, "rank %d count %zu: a stream that waited for the work ran before its end", rank,
                 count);
    }
    ops.destroyStream(caller);
    ops.destroyStream(after);
    return 0;
  }, fakeOptions());
  INFO(run.describe());
  REQUIRE(run.allOk());
}

TEST_CASE("a group binds to one device and refuses tensors on another, naming both", "[torch][device]") {
  RunResult run = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    FakeStreamOps ops;
    auto commPtr = std::make_shared<dev::DeviceComm>(ops, rank, nranks, 30, inheritedId(id));
    dev::DeviceComm& comm = *commPtr;
    RANK_CHECK(!comm.bound() && comm.device() == -1, "rank %d: bound before any use", rank);
    comm.bind(0);  // torch's device_id: made before the first operation
    ncclComm_t first = comm.on(0, "all_reduce");
    RANK_CHECK(comm.on(0, "broadcast") == first, "rank %d: a second device communicator for the same device", rank);
    int cuDev = -1, count = 0, me = -1;
    RANK_CHECK(ncclCommCuDevice(first, &cuDev) == ncclSuccess && cuDev == 0, "rank %d: comm on device %d", rank, cuDev);
    RANK_CHECK(ncclCommCount(first, &count) == ncclSuccess && count == nranks, "rank %d: count %d", rank, count);
    RANK_CHECK(ncclCommUserRank(first, &me) == ncclSuccess && me == rank, "rank %d: user rank %d", rank, me);
    std::string e = errorOf([&] { comm.on(1, "all_gather_into_tensor"); });
    RANK_CHECK(e.find("all_gather_into_tensor") != std::string::npos && e.find("cuda:1") != std::string::npos &&
                   e.find("cuda:0") != std::string::npos && e.find("rank " + std::to_string(rank)) != std::string::npos,
               "rank %d: refusal of another device says: %s", rank, e.c_str());
    return 0;
  }, fakeOptions());
  INFO(run.describe());
  REQUIRE(run.allOk());
}

TEST_CASE("after abort every operation of the group is refused naming abort", "[torch][device]") {
  RunResult run = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    FakeStreamOps ops;
    auto commPtr = std::make_shared<dev::DeviceComm>(ops, rank, nranks, 30, inheritedId(id));
    dev::DeviceComm& comm = *commPtr;
    comm.bind(0);
    comm.abort();
    dev::Stream caller = ops.createStream();
    std::vector<float> buf(3, 1.0f);
    std::string e = errorOf([&] {
      dev::StreamWork::launch(commPtr, 0, caller, "all_reduce", [&](ncclComm_t c, dev::Stream s) {
        comm.check(ncclAllReduce(buf.data(), buf.data(), 3, ncclFloat32, ncclSum, c, s), "ncclAllReduce");
      });
    });
    RANK_CHECK(e.find("abort()") != std::string::npos && e.find("all_reduce") != std::string::npos,
               "rank %d: after abort: %s", rank, e.c_str());
    comm.abort();  // a second abort is harmless
    ops.destroyStream(caller);
    return 0;
  }, fakeOptions());
  INFO(run.describe());
  REQUIRE(run.allOk());
}

TEST_CASE("a peer that dies surfaces as an error naming the waiting rank, within the group's timeout", "[torch][device]") {
  RankOptions o = fakeOptions(/*gyreTimeout=*/3);
  RunResult run = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    FakeStreamOps ops;
    // Declared before the communicator, so it outlives it: after the error
    // gyre's stream may still copy into it, until releasing the communicator
    // drains that stream (a GPU, too, finishes a stream's copies after an
    // abort). Freed first, it was written after the free.
    std::vector<float> buf = inputOf(rank, 4099);
    auto commPtr = std::make_shared<dev::DeviceComm>(ops, rank, nranks, /*timeoutSeconds=*/3, inheritedId(id));
    dev::DeviceComm& comm = *commPtr;
    comm.bind(0);
    if (rank == 1) _exit(0);  // gone without joining the all-reduce
    dev::Stream caller = ops.createStream();
    const auto t0 = std::chrono::steady_clock::now();
    std::string e = errorOf([&] {
      auto work = dev::StreamWork::launch(commPtr, 0, caller, "all_reduce", [&](ncclComm_t c, dev::Stream s) {
        comm.check(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, c, s), "ncclAllReduce");
      });
      work->synchronize(std::chrono::seconds(40));
    });
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_CHECK(!e.empty(), "rank 0: the all-reduce with a dead peer completed");
    RANK_CHECK(e.find("rank 0 of 2") != std::string::npos && e.find("all_reduce") != std::string::npos,
               "rank 0: the error does not name the rank and operation: %s", e.c_str());
    RANK_CHECK(e.find("did not complete within") == std::string::npos,
               "rank 0: gyre did not report the dead peer before the host's deadline: %s", e.c_str());
    RANK_CHECK(took < 30, "rank 0: the error took %.1f s", took);
    // The group is broken: the next operation fails at once, with the same cause.
    std::string again = errorOf([&] { comm.on(0, "broadcast"); });
    RANK_CHECK(again.find("failed earlier") != std::string::npos, "rank 0: next call after the failure: %s",
               again.c_str());
    return 0;
  }, o);
  INFO(run.describe());
  REQUIRE(run.allOk());
}

TEST_CASE("a peer that dies after enqueueing surfaces through gyre's asynchronous error, naming the rank", "[torch][device]") {
  RunResult run = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    FakeStreamOps ops;
    // Before the communicator, as in the case above: outlives its stream.
    std::vector<float> buf = inputOf(rank, 4099);
    auto commPtr = std::make_shared<dev::DeviceComm>(ops, rank, nranks, /*timeoutSeconds=*/3, inheritedId(id));
    dev::DeviceComm& comm = *commPtr;
    comm.bind(0);
    gyre::DeviceRuntime* rt = gyre::deviceRuntime();
    dev::Stream caller = ops.createStream();
    StreamGate gate;
    RANK_CHECK(rt->hostFunc(caller, &StreamGate::wait, &gate) == ncclSuccess, "hostFunc: %s", lastError().c_str());
    auto work = dev::StreamWork::launch(commPtr, 0, caller, "all_reduce", [&](ncclComm_t c, dev::Stream s) {
      comm.check(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, c, s), "ncclAllReduce");
    });
    // Both calls are enqueued; rank 1 dies before its stream runs its share.
    if (rank == 1) _exit(0);
    gate.open = true;
    const auto t0 = std::chrono::steady_clock::now();
    std::string e = errorOf([&] { work->synchronize(std::chrono::seconds(40)); });
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_CHECK(e.find("rank 0 of 2 on cuda:0") != std::string::npos && e.find("all_reduce") != std::string::npos &&
                   e.find("asynchronous") != std::string::npos,
               "rank 0: the error does not come from gyre's asynchronous error naming the rank: %s", e.c_str());
    RANK_CHECK(took < 30, "rank 0: the error took %.1f s", took);
    std::string again = errorOf([&] { work->isCompleted(); });
    RANK_CHECK(!again.empty(), "rank 0: the failed work later reads as completed");
    return 0;
  }, fakeOptions(/*gyreTimeout=*/3));
  INFO(run.describe());
  REQUIRE(run.allOk());
}

TEST_CASE("a split group's device communicator reduces over its members only", "[torch][device]") {
  RunResult run = runRanks(3, [](int rank, int nranks, const ncclUniqueId& id) {
    FakeStreamOps ops;
    dev::DeviceComm parent(ops, rank, nranks, 30, inheritedId(id));
    // Ranks 0 and 2 form the new group, in reverse order; rank 1 is not in it.
    const bool member = rank != 1;
    std::shared_ptr<dev::DeviceComm> child = parent.split(0, member ? 7 : NCCL_SPLIT_NOCOLOR, /*key=*/-rank, 30);
    if (!member) {
      RANK_CHECK(child == nullptr, "rank 1: got a communicator of a group it is not in");
      return 0;
    }
    RANK_CHECK(child != nullptr, "rank %d: no communicator from the split", rank);
    RANK_CHECK(child->size() == 2 && child->rank() == (rank == 2 ? 0 : 1) && child->device() == 0,
               "rank %d: split group rank %d of %d on %d", rank, child->rank(), child->size(), child->device());
    dev::Stream caller = ops.createStream();
    for (size_t count : {size_t(1), size_t(4099)}) {
      std::vector<float> buf = inputOf(rank, count);
      auto work = dev::StreamWork::launch(child, 0, caller, "all_reduce", [&](ncclComm_t c, dev::Stream s) {
        child->check(ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, c, s), "ncclAllReduce");
      });
      work->synchronize(std::chrono::seconds(30));
      RANK_CHECK(buf == sumOf({0, 2}, count), "rank %d count %zu: split all-reduce differs from ranks 0+2", rank,
                 count);
    }
    ops.destroyStream(caller);
    return 0;
  }, fakeOptions());
  INFO(run.describe());
  REQUIRE(run.allOk());
}

}  // namespace

namespace {

TEST_CASE("the CUDA runtime's stream ops report a missing device as an error naming the call", "[torch][device]") {
  // In a forked rank, so the test process itself never initialises CUDA.
  RunResult run = runRanks(1, [](int, int, const ncclUniqueId&) {
    dev::StreamOps* ops = dev::cudaStreamOps();
    if (ops == nullptr) return 0;  // built without the CUDA runtime: nothing to check
    try {
      int d = ops->currentDevice();
      dev::Stream s = ops->createStream();
      dev::Event e = ops->createEvent();
      ops->record(e, s);
      bool done = false;
      for (int i = 0; i < 10000 && !done; ++i) done = ops->query(e);
      RANK_CHECK(done, "an event recorded on an idle stream of device %d never completed", d);
      ops->destroyEvent(e);
      ops->destroyStream(s);
    } catch (const std::runtime_error& err) {
      // No GPU here: the refusal names the runtime call and its reason.
      std::string text = err.what();
      RANK_CHECK(text.find("gyre backend: cuda") != std::string::npos && text.find("failed") != std::string::npos,
                 "unexpected error text: %s", text.c_str());
      rankRecord("no_gpu", text);
    }
    return 0;
  }, RankOptions{});
  INFO(run.describe());
  REQUIRE(run.allOk());
  for (const RankOutcome& r : run.ranks)
    if (r.records.count("no_gpu")) WARN("no GPU here; the CUDA runtime said: " << r.records.at("no_gpu"));
}

}  // namespace
