// A lying peer on the first step of a call (the harness: lying_run.h):
// rank 1, instead of running the Broadcast it roots, writes one forged step
// into its ring connection to rank 0: a well-formed header whose size,
// count, sequence number, root, collective, datatype or operator lies, a
// single-copy announcement whose offset wraps around 2^64, or an abort
// notice naming a rank past the communicator. Later steps, the socket
// transport's data sockets and acknowledgements: lying_later.cc.
#include <catch2/catch.hpp>

#include "lying_run.h"

namespace {

using namespace gyre;
using namespace gyre::test;

}  // namespace

TEST_CASE("an honest forgery of the root's step is taken as the Broadcast's data on every path",
          "[faults][lying]") {
  runOnEveryPath({{"no lie", nullptr, {}}});
}

TEST_CASE("a step header whose size exceeds the slot or falls short of the step fails naming the sender",
          "[faults][lying]") {
  runOnEveryPath({
      {"size past the slot", [](ForgedStep* s) { s->meta.bytes = 64 << 20; }, {"67108864"}},
      {"size short of the step", [](ForgedStep* s) {
         s->meta.bytes = 128;
         s->payload.resize(128);
       }, {"128 bytes"}},
  });
}

TEST_CASE("a step whose payload is shorter than its header fails naming the sender (on a socket by GYRE_TIMEOUT)",
          "[faults][lying]") {
  auto shortPayload = [](ForgedStep* s) { s->payload.resize(100); };
  // A socket stream has no message boundaries: the rest is awaited.
  Lie awaited{"payload shorter than its header", shortPayload, {"rank 1"}};
  awaited.waitsForTimeout = true;
  runLie(Path::kSocket, awaited);
  // A network message is whole: its size is compared with the header's.
  for (Path path : everyPath())
    if (path == Path::kIb)
      runLie(path, {"payload shorter than its header", shortPayload, {"carried 100 bytes, its header says 256"}});
}

TEST_CASE("a step header with a count, call number or root past the call fails naming the sender and the value",
          "[faults][lying]") {
  runOnEveryPath({
      {"count past the buffer", [](ForgedStep* s) { s->meta.count = 1 << 30; }, {"mismatched", "1073741824"}},
      {"call number replayed", [](ForgedStep* s) { s->meta.opCount = 0; }, {"mismatched", "#0"}},
      {"call number far ahead", [](ForgedStep* s) { s->meta.opCount = 1001; }, {"mismatched", "#1001"}},
      {"root past the communicator", [](ForgedStep* s) { s->meta.root = 5; }, {"mismatched", "root 5"}},
  });
}

TEST_CASE("a step header whose collective, datatype or operator byte is outside its enum fails naming the byte",
          "[faults][lying]") {
  runOnEveryPath({
      {"collective byte 99", [](ForgedStep* s) { s->meta.coll = 99; }, {"mismatched", "collective 99"}},
      {"datatype byte 200", [](ForgedStep* s) { s->meta.datatype = 200; }, {"mismatched", "datatype 200"}},
      {"operator byte 0x77", [](ForgedStep* s) { s->meta.redop = 0x77; }, {"mismatched", "op 119"}},
  });
}

TEST_CASE("a shared-memory step marked with another step's sequence number fails naming the sender",
          "[faults][lying]") {
  Lie ahead{"sequence word far ahead", [](ForgedStep* s) { s->lineSeq = 1000; }, {"step 1 ", "as step 1000"}};
  runLie(Path::kShm, ahead);
  Lie skipped{"step 1 skipped: written as step 2", [](ForgedStep* s) {
                s->lineStep = 1;
                s->lineSeq = 2;
              }, {"rank 1"}};
  skipped.waitsForTimeout = true;
  runLie(Path::kShm, skipped);
}

TEST_CASE("an abort notice naming a rank past the communicator blames the rank that sent it", "[faults][lying]") {
  Lie notice{"abort notice naming rank 7 of 2", nullptr, {"rank 7", "not a rank of this 2-rank communicator"}};
  notice.notice = true;
  runOnEveryPath({notice});
}

TEST_CASE("a single-copy announcement whose offset wraps around 2^64 fails naming the sender instead of being mapped",
          "[faults][lying]") {
  // GYRE_SINGLE_COPY=always: the root's first step announces where its
  // elements are (a PeerAddress in the step's line) and rank 0 reads them
  // from there (on 2 ranks the first two thirds of the piece, 43 of the 64
  // elements: a 172-byte step). The lie names a real memfd of the liar, so
  // rank 0 maps it, at an offset of 2^64 - 64: added to the step's size it
  // wraps to 108, which once passed as inside the one-page buffer and made
  // rank 0 read from 64 bytes before its mapping.
  // The base of the memfd (0) is below the step's size, so that the wrapped
  // address is not below it.
  Lie wrapped{"announced offset 2^64 - 64", [](ForgedStep* s) {
                announceFromMemfd(s, {}, ~uint64_t{0} - 63, 43 * sizeof(int32_t));
              }, {"single-copy read of 172 bytes", "from rank 1"}};
  wrapped.env = {{"GYRE_SINGLE_COPY", "always"}};
  runLie(Path::kShm, wrapped);
}
