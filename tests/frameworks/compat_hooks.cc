// compat.h's layers for hooks that only torch 2.x declares (supportsCoalescing,
// abort, shutdown, endCoalescing returning one Work, supportsSplitting with
// split(store, ranks, options), eagerConnectSingleDevice), instantiated over a
// stand-in with 2.x's shape: the torch here is 1.13, where the process group
// compiles only the empty layers, so this is what checks that the 2.x ones
// compile and route each torch call to gyre's hook.
#include <cstdio>

#include "compat.h"

namespace {

namespace cx = torch_gyre::compat;

// The methods as c10d::Backend of torch 2.x declares them.
struct Backend2x : c10::intrusive_ptr_target {
  struct Options : c10::intrusive_ptr_target {
    std::chrono::milliseconds timeout{0};
  };
  Backend2x(int rank, int size) : rank(rank), size(size) {}
  ~Backend2x() override = default;
  virtual bool supportsSplitting() const { return false; }
  virtual c10::intrusive_ptr<Backend2x> split(const c10::intrusive_ptr<c10d::Store>& /*store*/,
                                              const std::vector<int>& /*ranks*/,
                                              const c10::intrusive_ptr<Options>& /*opts*/) {
    return {};
  }
  virtual void eagerConnectSingleDevice(at::Device /*device*/) {}
  virtual bool supportsCoalescing() const { return false; }
  virtual void abort() {}
  virtual void shutdown() {}
  virtual void startCoalescing() {}
  virtual c10::intrusive_ptr<c10d::Work> endCoalescing() { return {}; }
  int rank, size;
};

// A base without any of them (torch 1.x, early 2.x).
struct BackendWithout : c10::intrusive_ptr_target {
  BackendWithout(int, int) {}
  ~BackendWithout() override = default;
  virtual void startCoalescing() {}
  virtual void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>&) {}
};

template <class Base, bool kDetect2x>
using Adapter = cx::CoalescingHooks<
    cx::EndCoalescingReturnsWork<Base>::value,
    cx::EagerConnectHook<kDetect2x,
                         cx::SplitHook<kDetect2x, cx::ShutdownHook<kDetect2x, cx::AbortHook<kDetect2x,
                                                                   cx::CoalescingSupport<kDetect2x, Base>>>,
                                       Base>>>;

template <class Base, bool kDetect2x>
struct Group : Adapter<Base, kDetect2x> {
  Group() : Adapter<Base, kDetect2x>(1, 2) {}
  int aborts = 0, shutdowns = 0, opens = 0, closes = 0, binds = 0, boundDevice = -1;
  std::vector<int> splitRanks;
  std::chrono::milliseconds splitTimeout{-1};
  c10::intrusive_ptr<Base> splitMembers(const c10::intrusive_ptr<c10d::Store>& /*store*/, const std::vector<int>& ranks,
                                        std::chrono::milliseconds timeout) override {
    splitRanks = ranks;
    splitTimeout = timeout;
    return {};
  }
  void bindDevice(int device) override {
    ++binds;
    boundDevice = device;
  }
  void abortNow() override { ++aborts; }
  void shutdownNow() override { ++shutdowns; }
  void openBatch() override { ++opens; }
  c10::intrusive_ptr<c10d::Work> closeBatch() override {
    ++closes;
    return {};
  }
};

int failures = 0;
void expect(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  failures += ok ? 0 : 1;
}

}  // namespace

int main() {
  expect(cx::EndCoalescingReturnsWork<Backend2x>::value, "endCoalescing() returning a Work is detected");
  expect(!cx::EndCoalescingReturnsWork<BackendWithout>::value, "endCoalescing(works) is detected");
  expect(!cx::DeclaresAbort<BackendWithout>::value && !cx::DeclaresShutdown<BackendWithout>::value &&
             !cx::DeclaresSupportsCoalescing<BackendWithout>::value,
         "a base without abort/shutdown/supportsCoalescing gets none of the overrides");
  expect(cx::DeclaresAbort<Backend2x>::value == (GYRE_TORCH_MAJOR >= 2),
         "abort is overridden only when building against torch 2.x");

  Group<Backend2x, true> g;
  Backend2x& base = g;
  base.abort();
  base.shutdown();
  base.startCoalescing();
  base.endCoalescing();
  expect(base.supportsCoalescing(), "supportsCoalescing() is true");
  expect(g.aborts == 1 && g.shutdowns == 1, "abort() and shutdown() reach gyre's abortNow/shutdownNow");
  expect(g.opens == 1 && g.closes == 1, "startCoalescing/endCoalescing() open and close one gyre batch");

  expect(cx::DeclaresSplit<Backend2x>::value == (GYRE_TORCH_MAJOR >= 2) &&
             cx::DeclaresSupportsSplitting<Backend2x>::value == (GYRE_TORCH_MAJOR >= 2),
         "split(store, ranks, options) and supportsSplitting are detected (on torch 2.x builds)");
  expect(!cx::DeclaresSplit<BackendWithout>::value && !cx::DeclaresEagerConnect<BackendWithout>::value,
         "a base without split/eagerConnectSingleDevice gets neither override");
  expect(base.supportsSplitting(), "supportsSplitting() is true");
  auto opts = c10::make_intrusive<Backend2x::Options>();
  opts->timeout = std::chrono::milliseconds(4500);
  base.split(c10::intrusive_ptr<c10d::Store>(), {0, 2}, opts);
  expect(g.splitRanks == std::vector<int>({0, 2}) && g.splitTimeout.count() == 4500,
         "split(store, ranks, options) reaches gyre's splitMembers with the ranks and the options' timeout");
  base.eagerConnectSingleDevice(at::Device(at::kCPU));
  expect(g.binds == 0, "eagerConnectSingleDevice(cpu) makes no device communicator");
  base.eagerConnectSingleDevice(at::Device(at::kCUDA, 3));
  expect(g.binds == 1 && g.boundDevice == 3, "eagerConnectSingleDevice(cuda:3) binds the group to device 3");

  Group<BackendWithout, false> old;
  BackendWithout& oldBase = old;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  oldBase.startCoalescing();
  oldBase.endCoalescing(works);
  expect(old.opens == 1 && old.closes == 1, "startCoalescing/endCoalescing(works) open and close one gyre batch");
  return failures == 0 ? 0 : 1;
}
