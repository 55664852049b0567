// compat.h's layers for hooks that only torch 2.x declares (supportsCoalescing,
// abort, shutdown, endCoalescing returning one Work), instantiated over a
// stand-in with 2.x's shape: the torch here is 1.13, where the process group
// compiles only the empty layers, so this is what checks that the 2.x ones
// compile and route each torch call to gyre's hook.
#include <cstdio>

#include "compat.h"

namespace {

namespace cx = torch_gyre::compat;

// The methods as c10d::Backend of torch 2.x declares them.
struct Backend2x {
  Backend2x(int rank, int size) : rank(rank), size(size) {}
  virtual ~Backend2x() = default;
  virtual bool supportsCoalescing() const { return false; }
  virtual void abort() {}
  virtual void shutdown() {}
  virtual void startCoalescing() {}
  virtual c10::intrusive_ptr<c10d::Work> endCoalescing() { return {}; }
  int rank, size;
};

// A base without any of them (torch 1.x, early 2.x).
struct BackendWithout {
  BackendWithout(int, int) {}
  virtual ~BackendWithout() = default;
  virtual void startCoalescing() {}
  virtual void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>&) {}
};

template <class Base, bool kDetect2x>
using Adapter = cx::CoalescingHooks<
    cx::EndCoalescingReturnsWork<Base>::value,
    cx::ShutdownHook<kDetect2x, cx::AbortHook<kDetect2x, cx::CoalescingSupport<kDetect2x, Base>>>>;

template <class Base, bool kDetect2x>
struct Group : Adapter<Base, kDetect2x> {
  Group() : Adapter<Base, kDetect2x>(1, 2) {}
  int aborts = 0, shutdowns = 0, opens = 0, closes = 0;
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

  Group<BackendWithout, false> old;
  BackendWithout& oldBase = old;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  oldBase.startCoalescing();
  oldBase.endCoalescing(works);
  expect(old.opens == 1 && old.closes == 1, "startCoalescing/endCoalescing(works) open and close one gyre batch");
  return failures == 0 ? 0 : 1;
}
