// The executor's side of payloads by pointer (src/host/user_payloads.h): which
// steps may send from user memory, when a write must wait for a send still
// reading the memory, and which receives offer their destination.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "src/host/user_payloads.h"

namespace gyre {
namespace {

// A send connection as the socket transport leaves it: own FIFO memory, its
// counters, payloads by pointer.
struct SendSide {
  std::vector<char> slots = std::vector<char>(kFifoSlots * 8192);
  SlotMeta meta[kFifoSlots]{};
  uint64_t tail = 0, head = 0;
  PayloadPointers pointers;
  Connection conn;
  SendSide() {
    conn.fifo.slots = slots.data();
    conn.fifo.slotBytes = 8192;
    conn.fifo.meta = meta;
    conn.fifo.tail = &tail;
    conn.fifo.head = &head;
    conn.isSend = true;
    conn.pointers = &pointers;
  }
  // Posts a step whose payload of `bytes` the transport takes from `from` (null: the slot).
  void post(const char* from, uint32_t bytes) {
    pointers.sendFrom[conn.step % kFifoSlots] = from;
    conn.fifo.metaOf(conn.step).bytes = bytes;
    tail = ++conn.step;
  }
};

TEST_CASE("a step sends from user memory only where its sent elements are exactly there", "[unit][pointers]") {
  const float src[4] = {}, dst[4] = {};
  CHECK(sentElementsInUserMemory(StepKind::Send, false, false, src, dst) == src);
  CHECK(sentElementsInUserMemory(StepKind::CopySend, false, false, src, dst) == src);
  // A pre-op (PreMulSum, avg) or post-op changes the elements on the way: they exist only in the slot.
  CHECK(sentElementsInUserMemory(StepKind::Send, true, false, src, dst) == nullptr);
  CHECK(sentElementsInUserMemory(StepKind::CopySend, false, true, src, dst) == nullptr);
  // dst holds what these send, whatever the op did on the way.
  CHECK(sentElementsInUserMemory(StepKind::RecvCopySend, false, false, src, dst) == dst);
  CHECK(sentElementsInUserMemory(StepKind::RecvReduceCopySend, true, true, src, dst) == dst);
  // Reduced into the slot only, or nothing sent.
  CHECK(sentElementsInUserMemory(StepKind::RecvReduceSend, false, false, src, dst) == nullptr);
  CHECK(sentElementsInUserMemory(StepKind::Recv, false, false, src, dst) == nullptr);
  CHECK(sentElementsInUserMemory(StepKind::Copy, false, false, src, dst) == nullptr);
  CHECK(!stepWritesDst(StepKind::Send));
  CHECK(!stepWritesDst(StepKind::RecvReduceSend));
  CHECK(stepWritesDst(StepKind::RecvReduceCopy));
  CHECK(stepWritesDst(StepKind::RecvCopySend));
}

TEST_CASE("a write waits only for sends that still read overlapping user memory", "[unit][pointers]") {
  std::vector<char> user(1 << 16);
  char* x = user.data();
  SendSide a, b;
  Connection* conns[] = {&a.conn, &b.conn};
  a.post(x, 4096);          // step 0: x[0, 4096) by pointer
  a.post(nullptr, 4096);    // step 1: from the slot
  b.post(x + 8192, 8192);   // step 0 on b: x[8192, 16384)
  CHECK(pendingSendOverlapping(conns, 2, x, x + 1) == &a.conn);
  CHECK(pendingSendOverlapping(conns, 2, x + 4095, x + 4096) == &a.conn);
  CHECK(pendingSendOverlapping(conns, 2, x + 4096, x + 8192) == nullptr);  // between the two
  CHECK(pendingSendOverlapping(conns, 2, x + 16000, x + 20000) == &b.conn);
  CHECK(pendingSendOverlapping(conns, 2, x + 16384, x + 20000) == nullptr);
  // Once head passes a step its bytes have left this process.
  a.head = 1;
  CHECK(pendingSendOverlapping(conns, 2, x, x + 4096) == nullptr);
  b.head = 1;
  CHECK(pendingSendOverlapping(conns, 2, x, x + user.size()) == nullptr);
  // A connection whose transport copies (shared memory) never holds user memory.
  a.post(x, 4096);
  a.conn.pointers = nullptr;
  CHECK(pendingSendOverlapping(conns, 1, x, x + 4096) == nullptr);
}

TEST_CASE("only a waiting Recv or RecvCopySend of 4 KiB or more offers its destination", "[unit][pointers]") {
  std::vector<char> slots(kFifoSlots * 8192), dst(8192);
  SlotMeta meta[kFifoSlots]{};
  uint64_t tail = 0, head = 0;
  Connection in;
  in.fifo.slots = slots.data();
  in.fifo.slotBytes = 8192;
  in.fifo.meta = meta;
  in.fifo.tail = &tail;
  in.fifo.head = &head;
  in.step = 3;

  offerDestination(in, StepKind::Recv, dst.data(), 8192);
  CHECK(in.pointers == nullptr);  // the transport copies: nothing to offer to
  PayloadPointers pointers;
  in.pointers = &pointers;
  offerDestination(in, StepKind::RecvReduceCopy, dst.data(), 8192);  // reduces from the slot
  offerDestination(in, StepKind::Recv, dst.data(), kByPointerMinBytes - 1);
  CHECK(in.pointers->offerStep == UINT64_MAX);
  offerDestination(in, StepKind::RecvCopySend, dst.data(), 8192);
  CHECK(in.pointers->offerStep == 3);
  CHECK(in.pointers->offerDst == dst.data());
  CHECK(in.pointers->offerBytes == 8192);

  // Where the executor finds the payload: the slot, unless the transport took the offer.
  CHECK(receivedPayload(in, 8192) == in.fifo.slot(3));
  in.pointers->recvAt[3 % kFifoSlots] = dst.data();
  CHECK(receivedPayload(in, 8192) == dst.data());
}

}  // namespace
}  // namespace gyre
