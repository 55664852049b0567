// A lying peer past the first step of a call, on the socket transport's data
// sockets, and in acknowledgements (the harness: lying_run.h). Rank 1 sends
// the first steps of the Broadcast it roots honestly and lies in a later
// one (a header, or a single-copy announcement of the call's second piece);
// on sockets with data sockets (payloads of 64 KiB and up go in pieces
// through helper threads) the lie is in the header or in the pieces; and as
// a receiver it acknowledges steps that were never sent.
#include <catch2/catch.hpp>

#include "lying_run.h"

namespace {

using namespace gyre;
using namespace gyre::test;

// Steps of 1 KiB (NCCL_BUFFSIZE / 8): a call of 4, in payload blocks on
// shared memory, whole control messages on a socket.
const EnvList kSmallSteps = {{"NCCL_BUFFSIZE", "8192"}};
constexpr size_t kSmallStep = 256;  // int32 elements

// Steps of 128 KiB over 2 data sockets (one helper thread): each step's
// payload goes as two 64 KiB pieces.
const EnvList kDataSockets = {{"NCCL_BUFFSIZE", "1048576"}, {"NCCL_NSOCKS_PERTHREAD", "2"}};
constexpr size_t kPieceStep = 32768;  // int32 elements
constexpr uint32_t kPieceStepBytes = kPieceStep * 4;

// `lie` at step `at` of a Broadcast of `steps` steps of `elements`.
Lie later(Lie lie, const EnvList& env, size_t elements, size_t steps, size_t at) {
  lie.env = env;
  lie.count = elements * steps;
  lie.atStep = at;
  return lie;
}

// A payload of `bytes` in place of the step's.
auto payloadBytes(size_t bytes) {
  return [bytes](ForgedStep* s) { s->payload.resize(bytes, 7); };
}

}  // namespace

TEST_CASE("honest forgeries of later steps and of data-socket pieces are taken as the Broadcast's data",
          "[faults][lying]") {
  runOnEveryPath({later({"the last of 4 steps, no lie", nullptr, {}}, kSmallSteps, kSmallStep, 4, 3)});
  runLie(Path::kSocket, later({"2 steps in pieces, no lie", nullptr, {}}, kDataSockets, kPieceStep, 2, 1));
}

TEST_CASE("a later step whose header lies fails naming the sender and the lie", "[faults][lying]") {
  runOnEveryPath({
      later({"step 3 of 4: size past the slot", [](ForgedStep* s) { s->meta.bytes = 64 << 20; }, {"67108864"}},
            kSmallSteps, kSmallStep, 4, 2),
      later({"step 3 of 4: size short of the step", [](ForgedStep* s) {
               s->meta.bytes = 512;
               s->payload.resize(512);
             }, {"512 bytes"}},
            kSmallSteps, kSmallStep, 4, 2),
      later({"step 3 of 4: call number replayed", [](ForgedStep* s) { s->meta.opCount = 0; }, {"mismatched", "#0"}},
            kSmallSteps, kSmallStep, 4, 2),
      later({"step 3 of 4: count past the buffer", [](ForgedStep* s) { s->meta.count = 1 << 30; },
             {"mismatched", "1073741824"}},
            kSmallSteps, kSmallStep, 4, 2),
  });
  runLie(Path::kShm, later({"step 3 of 4: sequence word far ahead", [](ForgedStep* s) { s->lineSeq = 1000; },
                            {"step 3 ", "as step 1000"}},
                           kSmallSteps, kSmallStep, 4, 2));
}

TEST_CASE("a step on the data sockets whose header or pieces lie fails naming the sender", "[faults][lying]") {
  // The header is checked before any piece is awaited.
  runLie(Path::kSocket, later({"step 2 of 2: size past the slot", [](ForgedStep* s) { s->meta.bytes = 64 << 20; },
                               {"67108864", "131072-byte slots"}},
                              kDataSockets, kPieceStep, 2, 1));
  // A size that fits the slot but is not the step's: the pieces land in the
  // slot (never in the user's buffer, which is offered for the step's own
  // size only), and the step's check names both sizes.
  runLie(Path::kSocket, later({"step 1 of 1: 96 KiB for a 128 KiB step", [](ForgedStep* s) {
                                 s->meta.bytes = 96 << 10;
                                 s->payload.resize(96 << 10);
                               }, {"98304 bytes for a 131072-byte step"}},
                              kDataSockets, kPieceStep, 1, 0));
  // More or fewer bytes than the step header said, cut and described as an
  // honest sender of that many would: the first piece header says so.
  runLie(Path::kSocket, later({"step 1 of 2: 8 KiB more than announced", payloadBytes(kPieceStepBytes + (8 << 10)),
                               {"a piece of 69632 bytes at offset 0 of a 139264-byte payload", "65536 bytes"}},
                              kDataSockets, kPieceStep, 2, 0));
  runLie(Path::kSocket, later({"step 2 of 2: 8 KiB fewer than announced", payloadBytes(kPieceStepBytes - (8 << 10)),
                               {"a piece of 61440 bytes"}},
                              kDataSockets, kPieceStep, 2, 1));
}

TEST_CASE("a piece on a data socket whose header lies, or that carries more or fewer bytes than its header, fails "
          "naming the sender", "[faults][lying]") {
  const auto headers = [](std::function<void(int, socket_detail::PieceHeader*)> lie) {
    return [lie](ForgedStep* s) { s->lieInPiece = lie; };
  };
  const std::vector<Lie> lies = {
      later({"step 2 of 2: a piece marked as job 5",
             headers([](int, socket_detail::PieceHeader* h) { h->job = 5; }), {"(piece job 5)", "(job 1)"}},
            kDataSockets, kPieceStep, 2, 1),
      later({"step 2 of 2: a piece at offset 2^31",
             headers([](int i, socket_detail::PieceHeader* h) { h->offset = i == 1 ? 1u << 31 : h->offset; }),
             {"at offset 2147483648", "at offset 65536"}},
            kDataSockets, kPieceStep, 2, 1),
      later({"step 2 of 2: a piece of 64 MiB",
             headers([](int, socket_detail::PieceHeader* h) { h->bytes = 64 << 20; }), {"a piece of 67108864 bytes"}},
            kDataSockets, kPieceStep, 2, 1),
  };
  for (const Lie& lie : lies) runLie(Path::kSocket, lie);
  // 4 KiB more on each socket behind headers that say the step's own cut:
  // the excess is read as the next piece's header, which is not one.
  auto hidden = [](int64_t extra) {
    return [extra](ForgedStep* s) {
      s->payload.resize(static_cast<size_t>(static_cast<int64_t>(kPieceStepBytes) + 2 * extra), 7);
      s->lieInPiece = [](int i, socket_detail::PieceHeader* h) {
        *h = {h->job, kPieceStepBytes, static_cast<uint32_t>(i) * (kPieceStepBytes / 2), kPieceStepBytes / 2};
      };
    };
  };
  Lie more = later({"step 1 of 2: more bytes than its piece header says", hidden(4096), {"(job 1)"}}, kDataSockets,
                   kPieceStep, 2, 0);
  more.honestAfter = 1;
  runLie(Path::kSocket, more);
  // Fewer: a stream cannot tell a short piece from a late one.
  Lie fewer = later({"step 2 of 2: fewer bytes than its piece header says", hidden(-4096), {"rank 1"}}, kDataSockets,
                    kPieceStep, 2, 1);
  fewer.waitsForTimeout = true;
  runLie(Path::kSocket, fewer);
}

TEST_CASE("a later single-copy announcement past the liar's buffer fails naming the sender", "[faults][lying]") {
  // GYRE_SINGLE_COPY=always with steps of 512 bytes: a piece is 8 steps,
  // 1024 elements, and a Broadcast of 2048 two pieces. On 2 ranks rank 0
  // reads the first 683 of each piece's elements (2732 bytes) from where
  // the root announces them. Rank 1 announces piece 1 at the real memfd
  // that holds the call's data, whose piece 0 rank 0 has read honestly,
  // 4 bytes before the end of its 2 pages.
  constexpr size_t kCount = 2048;
  constexpr uint32_t kReadBytes = 683 * sizeof(int32_t);
  Lie past{"piece 2 of 2 announced 4 bytes before the end of the memfd", [](ForgedStep* s) {
             (void)announceFromMemfd(s, payloadOf(kCount), kCount * sizeof(int32_t) - 4, kReadBytes);
           }, {"single-copy read of 2732 bytes", "from rank 1"}};
  past.every = [](size_t k, ForgedStep* s) {
    (void)announceFromMemfd(s, payloadOf(kCount), k * 1024 * sizeof(int32_t), kReadBytes);
  };
  past.env = {{"GYRE_SINGLE_COPY", "always"}, {"NCCL_BUFFSIZE", "4096"}};
  past.count = kCount;
  past.atStep = 1;
  runLie(Path::kShm, past);
}

TEST_CASE("a receiver that acknowledges steps never sent fails the sender naming it", "[faults][lying]") {
  // Rank 0 roots a Broadcast of 12 steps of 8 KiB (slots: 8 in flight) and
  // has filled its FIFO when rank 1 lies. No acknowledgement crosses a
  // socket: a sender's credits there are its own sends.
  const EnvList slots = {{"NCCL_BUFFSIZE", "65536"}};
  auto acknowledging = [&](Lie lie, uint64_t ahead) {
    lie.env = slots;
    lie.count = 12 * 2048;
    lie.acknowledgesAhead = ahead;
    return lie;
  };
  runLie(Path::kShm, acknowledging({"one step more than sent", nullptr, {"acknowledged 9 steps", "sent only 8"}}, 1));
  runLie(Path::kShm, acknowledging({"a FIFO's worth more than sent", nullptr, {"acknowledged 16 steps", "sent only 8"}},
                                   kFifoSlots));
  // IB: the receiver's FIFO entry for the sender's next message (its 17th:
  // 8 steps of two) announces a receive 32 later, a FIFO's worth of
  // receives (kIbSlots) ahead.
  for (Path path : everyPath())
    if (path == Path::kIb)
      runLie(path, acknowledging({"a receive announced 32 ahead", nullptr, {"receive #49", "receive #17"}}, 32));
}
