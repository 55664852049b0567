// Failures that are a matter of course (an accept slice that ends with no
// caller while hellos are pending) must not become anyone's last error:
// ncclGetLastError after a healthy rendezvous reads "" on every thread.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string>
#include <thread>

#include "src/bootstrap/net_address.h"
#include "src/bootstrap/pending_hellos.h"
#include "src/bootstrap/socket.h"
#include "src/debug/deadline.h"
#include "src/debug/error.h"

using gyre::clearThreadError;
using gyre::fail;
using gyre::lastErrorText;
using gyre::TentativeFailures;

TEST_CASE("an accept slice that ends while a hello is pending leaves no error text for another thread",
          "[bootstrap][errors]") {
  clearThreadError();
  sockaddr_in loopback{};
  loopback.sin_family = AF_INET;
  loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  loopback.sin_port = 0;  // any free port
  const gyre::NetAddress any(reinterpret_cast<const sockaddr*>(&loopback));
  gyre::Socket listener;
  gyre::NetAddress bound;
  REQUIRE(gyre::Socket::listenOn(any, &listener, &bound) == ncclSuccess);
  // A caller that connected but has not sent its hello keeps the root slicing.
  gyre::Socket silent;
  REQUIRE(gyre::Socket::connectTo(bound, gyre::Deadline::afterSeconds(5), nullptr, &silent, "test connect") ==
          ncclSuccess);
  gyre::Socket first;
  gyre::NetAddress from;
  REQUIRE(listener.acceptOne(&first, &from, gyre::Deadline::afterSeconds(5), nullptr, "test accept") == ncclSuccess);

  bool sliceEnded = false;
  ncclResult_t r = ncclInternalError;
  std::string rootThreadText;
  std::thread root([&] {
    gyre::Socket next;
    gyre::NetAddress nextFrom;
    r = gyre::acceptAround(listener, /*pending=*/true, gyre::Deadline::afterSeconds(5), nullptr,
                           "rendezvous root: accept", &next, &nextFrom, &sliceEnded);
    rootThreadText = lastErrorText();
  });
  root.join();
  CHECK(r == ncclSuccess);
  CHECK(sliceEnded);
  CHECK(rootThreadText.empty());
  CHECK(std::string(lastErrorText()).empty());
}

TEST_CASE("a tentative failure restores the thread's earlier text unless kept", "[errors]") {
  clearThreadError();
  (void)fail(ncclInvalidArgument, "the earlier error");
  {
    TentativeFailures attempt;
    (void)fail(ncclSystemError, "a probe that failed as probes do");
    CHECK(std::string(lastErrorText()) == "a probe that failed as probes do");
  }
  CHECK(std::string(lastErrorText()) == "the earlier error");
}

TEST_CASE("a kept tentative failure becomes the last error, seen from other threads too", "[errors]") {
  clearThreadError();
  {
    TentativeFailures outer;
    {
      TentativeFailures inner;
      (void)fail(ncclRemoteError, "the peer closed during the attempt");
      inner.keep();
    }
    // The outer scope has not decided yet: other threads see nothing new.
    std::string seen;
    std::thread other([&] { seen = lastErrorText(); });
    other.join();
    CHECK(seen != "the peer closed during the attempt");
    outer.keep();
  }
  std::string seen;
  std::thread other([&] { seen = lastErrorText(); });
  other.join();
  CHECK(seen == "the peer closed during the attempt");
  CHECK(std::string(lastErrorText()) == "the peer closed during the attempt");
}
