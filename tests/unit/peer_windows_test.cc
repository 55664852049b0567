// The data paths' table of registered windows (src/device/peer_windows.h):
// a buffer inside a window is found with its offset, a peer's address is
// that peer's base plus the offset, and every range leaving the peer's own
// window, or naming an unreachable peer or an unknown window, misses.
#include <catch2/catch.hpp>

#include "src/device/peer_windows.h"

using gyre::PeerWindow;
using gyre::PeerWindows;

namespace {

// This rank (1) and its peers' buffers as mapped here; rank 2 is not
// reachable.
// This rank's window starts 16 bytes into its array, so the test can name
// the byte before it.
constexpr size_t kMine = 4096;
char arena[16 + kMine], peer0[8192], peer1[1024];
char* const mine = arena + 16;

void addWindow7(PeerWindows* t) {
  t->add(PeerWindow{7, mine, kMine, {peer0, mine, nullptr}, {sizeof peer0, kMine, 4096}});
}

}  // namespace

TEST_CASE("a range inside a registered window maps to each reachable peer's bytes at the same offset",
          "[peer_windows]") {
  PeerWindows t;
  addWindow7(&t);
  void* at = nullptr;
  REQUIRE(t.peerAddress(mine + 100, 64, 0, &at));
  CHECK(at == peer0 + 100);
  REQUIRE(t.peerAddress(mine + 100, 64, 1, &at));
  CHECK(at == mine + 100);
  uint64_t serial = 0;
  size_t offset = 0;
  REQUIRE(t.locate(mine + 4095, 1, &serial, &offset));
  CHECK((serial == 7 && offset == 4095));
  REQUIRE(t.locate(mine + 4096, 0, &serial, &offset));  // an empty range at the end
  // A peer's own size bounds its range: rank 0's window is larger than this
  // rank's.
  REQUIRE(t.peerAddressAt(7, 8000, 192, 0, &at));
  CHECK(at == peer0 + 8000);
  CHECK_FALSE(t.peerAddressAt(7, 8000, 193, 0, &at));
}

TEST_CASE("ranges leaving the window, unreachable peers and unknown windows miss", "[peer_windows]") {
  PeerWindows t;
  addWindow7(&t);
  void* at = nullptr;
  CHECK_FALSE(t.peerAddress(mine + 4000, 97, 0, &at));  // leaves this rank's window
  CHECK_FALSE(t.peerAddress(mine - 1, 1, 0, &at));      // before it
  CHECK_FALSE(t.peerAddress(mine, 16, 2, &at));         // rank 2 is not load/store accessible
  CHECK_FALSE(t.peerAddress(mine, 16, 3, &at));         // no rank 3
  CHECK_FALSE(t.peerAddress(mine, 16, -1, &at));
  CHECK_FALSE(t.peerAddressAt(8, 0, 1, 0, &at));        // no window 8
  t.remove(7);
  CHECK_FALSE(t.peerAddress(mine, 16, 0, &at));
  CHECK(t.count() == 0);
}

TEST_CASE("of overlapping windows the one holding the whole range is found", "[peer_windows]") {
  PeerWindows t;
  t.add(PeerWindow{1, mine, 4096, {peer0}, {4096}});
  t.add(PeerWindow{2, mine + 1024, 512, {peer1}, {512}});
  uint64_t serial = 0;
  size_t offset = 0;
  REQUIRE(t.locate(mine + 1100, 100, &serial, &offset));
  CHECK((serial == 2 && offset == 76));
  REQUIRE(t.locate(mine + 1100, 1000, &serial, &offset));  // leaves window 2, inside window 1
  CHECK((serial == 1 && offset == 1100));
  void* at = nullptr;
  REQUIRE(t.peerAddress(mine + 1100, 1000, 0, &at));
  CHECK(at == peer0 + 1100);
}
