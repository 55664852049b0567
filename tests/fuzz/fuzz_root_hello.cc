// The rendezvous root's side: what callers send it. The input is a series
// of RootHello records; a hello from another root (fromRoot) is followed by
// that root's status record and, if it says OK, its block of PeerInfo
// records, as on the wire. Each is checked as gatherAtRoot checks it, and a
// root that ran out of callers describes who is missing.
#include <string>
#include <vector>

#include "src/bootstrap/root_gather.h"
#include "tests/fuzz/fuzz_input.h"

using namespace gyre;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  RootGather g;
  while (in.left() > 0 && g.failure.empty() && !g.complete()) {
    const RootHello hello = in.take<RootHello>();
    bool first = false;
    g.failure = admitHello(&g, hello, &first);
    if (hello.fromRoot) {
      RootBlock b;
      b.hello = hello;
      if (g.failure.empty()) {
        RootReply status = in.take<RootReply>();
        g.failure = blockStatusProblem(hello, &status, g.nranks, g.nRoots);
        if (status.status != kRootOk && g.failure.empty()) __builtin_trap();  // a failure never reads as success
        if (g.failure.empty()) {
          // The status said how many records follow: never more than the input holds.
          const size_t n = static_cast<size_t>(status.nranks);
          if (n > in.left() / sizeof(PeerInfo) + 1) break;
          for (size_t i = 0; i < n; ++i) b.records.push_back(in.take<PeerInfo>());
          g.failure = blockRecordsProblem(hello, b.records, g.nranks, g.nRoots);
        }
      }
      g.roots.push_back(std::move(b));
      continue;
    }
    g.ranks.push_back({Socket(), hello});
  }
  if (g.failure.empty() && !g.complete()) (void)describeMissing(g, 120.0);
  return 0;
}
