// The several-root rendezvous' block assignment (src/bootstrap/root_blocks.h):
// checked against a direct count, not against the formulas themselves.
#include <catch2/catch.hpp>

#include <vector>

#include "src/bootstrap/root_blocks.h"

TEST_CASE("every rank reports to exactly the root whose block holds it, and every root has a rank",
          "[bootstrap][roots]") {
  for (int nranks = 1; nranks <= 70; ++nranks)
    for (int nRoots = 1; nRoots <= nranks; ++nRoots) {
      std::vector<int> served(nRoots, 0);
      for (int r = 0; r < nranks; ++r) {
        const int root = gyre::rootOfRank(r, nranks, nRoots);
        REQUIRE(root >= 0);
        REQUIRE(root < nRoots);
        // r lies in [first(root), first(root + 1)).
        REQUIRE(gyre::firstRankOfRoot(root, nranks, nRoots) <= r);
        REQUIRE(r < gyre::firstRankOfRoot(root + 1, nranks, nRoots));
        ++served[root];
      }
      for (int i = 0; i < nRoots; ++i) {
        INFO(nranks << " ranks, " << nRoots << " roots, root " << i);
        CHECK(served[i] == gyre::blockSizeOfRoot(i, nranks, nRoots));
        // Blocks differ by at most one rank: n/k rounded down or up.
        CHECK(served[i] >= nranks / nRoots);
        CHECK(served[i] <= (nranks + nRoots - 1) / nRoots);
      }
    }
}

TEST_CASE("4096 ranks over 1024 roots: blocks of 4, rank 4095 at root 1023", "[bootstrap][roots]") {
  CHECK(gyre::rootOfRank(4095, 4096, 1024) == 1023);
  CHECK(gyre::rootOfRank(4, 4096, 1024) == 1);
  CHECK(gyre::blockSizeOfRoot(7, 4096, 1024) == 4);
  CHECK(gyre::firstRankOfRoot(1, 10, 3) == 3);  // 10 over 3: blocks 3, 3, 4
  CHECK(gyre::blockSizeOfRoot(2, 10, 3) == 4);
}
