// What a peer sends on the data paths is checked before it is used: a
// socket receiver fed lying step headers (a step larger than its slots, an
// abort notice that names no rank) fails naming the sender and writes
// nothing past its FIFO, and a host lane's check of a received header names
// the sender and what differs (another call, another size). The root's and
// the rank's checks of rendezvous records reject records that are not
// their rank's or whose host name is not terminated. A single-copy
// announcement whose offset wraps past 2^64 maps nothing.
#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "src/bootstrap/root_answer.h"
#include "src/bootstrap/root_gather.h"
#include "src/debug/error.h"
#include "src/host/peer_mappings.h"
#include "src/sched/slot_meta.h"
#include "src/transport/socket/socket_stream.h"

using namespace gyre;

namespace {

constexpr size_t kSlotBytes = 4096;
constexpr int kPeer = 3;

// A socket connection's receiving side, as the socket transport sets it up,
// whose peer end the test writes.
struct Receiver {
  socket_detail::SocketConn s;
  Connection conn;
  int peerFd = -1;

  Receiver() {
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    s.socket = Socket(fds[0]);
    peerFd = fds[1];
    s.slots.assign(kFifoSlots * kSlotBytes + kSlotBytes, 0x5a);  // one guard slot after the FIFO
    conn.fifo.slots = s.slots.data();
    conn.fifo.slotBytes = kSlotBytes;
    conn.fifo.meta = s.meta;
    conn.fifo.tail = &s.tail;
    conn.fifo.head = &s.head;
    conn.peer = kPeer;
    conn.pointers = &s.pointers;
    s.what = "socket from rank 3";
    s.rank = 0;
  }
  ~Receiver() { close(peerFd); }

  void peerSends(const SlotMeta& m, size_t payload) {
    std::vector<char> bytes(sizeof(m) + payload, 0x11);
    memcpy(bytes.data(), &m, sizeof(m));
    REQUIRE(write(peerFd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  }

  bool guardIntact() const {
    for (size_t i = kFifoSlots * kSlotBytes; i < s.slots.size(); ++i)
      if (s.slots[i] != 0x5a) return false;
    return true;
  }
};

PeerInfo record(int rank, const char* host) {
  PeerInfo p{};
  p.rank = rank;
  snprintf(p.host, sizeof(p.host), "%s", host);
  return p;
}

}  // namespace

TEST_CASE("a socket peer's step header larger than the slots fails naming the peer and writes nothing past the FIFO") {
  Receiver r;
  SlotMeta m{};
  m.bytes = 1 << 20;
  r.peerSends(m, 2 * kSlotBytes);
  int culprit = -1;
  CHECK(socket_detail::progressRecv(&r.s, r.conn, &culprit) != ncclSuccess);
  CHECK(culprit == kPeer);
  CHECK(std::string(lastErrorText()).find("rank 3 sent a 1048576-byte step into 4096-byte slots") != std::string::npos);
  CHECK(r.guardIntact());
  CHECK(r.s.recvd == 0);
}

TEST_CASE("a socket peer's abort notice that names no rank blames the peer instead of reading as no notice") {
  Receiver r;
  SlotMeta notice{};
  notice.flags = kMetaAbort;
  notice.count = ~uint64_t{0};
  notice.bytes = 1 << 20;  // and a lying size, which must never be taken for a step's
  r.peerSends(notice, 0);
  int culprit = -1;
  CHECK(socket_detail::progressRecv(&r.s, r.conn, &culprit) == ncclRemoteError);
  CHECK(culprit == kPeer);
  CHECK(std::string(lastErrorText()).find("rank 3") != std::string::npos);
  // Reported again on the next pass, and still nothing taken as a step.
  culprit = -1;
  CHECK(socket_detail::progressRecv(&r.s, r.conn, &culprit) == ncclRemoteError);
  CHECK(culprit == kPeer);
  CHECK(r.s.recvd == 0);
  CHECK(r.guardIntact());
}

TEST_CASE("a received step header of another call or another size fails naming the sender and both sides") {
  SlotMeta want{};
  want.opCount = 7;
  want.count = 1000;
  want.bytes = 4000;
  want.coll = static_cast<uint8_t>(CollKind::AllReduce);
  want.datatype = ncclFloat32;
  want.redop = ncclSum;
  want.root = -1;
  SlotMeta got = want;
  CHECK(checkPeerSlotMeta(2, got, 0, want, CollKind::AllReduce) == ncclSuccess);
  got.bytes = 4096;
  CHECK(checkPeerSlotMeta(2, got, 0, want, CollKind::AllReduce) != ncclSuccess);
  CHECK(std::string(lastErrorText()).find("rank 2 sent 4096 bytes for a 4000-byte step") != std::string::npos);
  got = want;
  got.datatype = 251;  // no datatype: named as such, never converted to the enum
  got.redop = 0xfe;
  CHECK(checkPeerSlotMeta(2, got, 0, want, CollKind::AllReduce) == ncclInvalidUsage);
  const std::string text = lastErrorText();
  CHECK(text.find("rank 2 sent data for") != std::string::npos);
  CHECK(text.find("datatype 251 (not a datatype)") != std::string::npos);
  CHECK(text.find("op 254 (not an operator)") != std::string::npos);
}

TEST_CASE("rendezvous records that are not their rank's or whose host name is unterminated are refused") {
  CHECK(peerInfoProblem(record(2, "node1"), 2).empty());
  CHECK(peerInfoProblem(record(5, "node1"), 2) == "its record names rank 5");
  PeerInfo open = record(2, "");
  memset(open.host, 'A', sizeof(open.host));
  CHECK(peerInfoProblem(open, 2) == "its record's host name is not terminated");

  UniqueIdContents id;
  std::vector<PeerInfo> table = {record(0, "a"), open};
  table[1].rank = 1;
  CHECK(checkPeerTable(table, "rendezvous root at 127.0.0.1:1") == ncclRemoteError);
  CHECK(std::string(lastErrorText()).find("the record of rank 1 is wrong") != std::string::npos);

  RootReply reply{};
  reply.status = kRootFailed;
  memset(reply.message, 'x', sizeof(reply.message));  // unterminated: cut at the record's end
  CHECK(checkRootReply(&reply, 2, id, "rendezvous root") == ncclRemoteError);
  CHECK(std::string(lastErrorText()).size() < 512);
}

TEST_CASE("a rendezvous hello claiming two billion ranks is described by its first missing ranks only") {
  RootGather g;
  RootHello h{};
  h.nranks = 0x7fffffff;
  h.nRoots = 1;
  h.rank = 0;
  h.info = record(0, "node1");
  bool first = false;
  CHECK(admitHello(&g, h, &first).empty());
  CHECK(first);
  g.ranks.push_back({Socket(), h});
  const std::string text = describeMissing(g, 120.0);
  CHECK(text.find("ranks 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, ... of 2147483647") == 0);
}

TEST_CASE("a single-copy announcement whose offset wraps around 2^64 is not taken as inside the peer's buffer") {
  // The announced allocation is a real memfd of this process, so only the
  // offset decides: 2^64 - 4096 past its base plus a 4096-byte step wraps to 0.
  const int fd = memfd_create("peer-headers", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 4096) == 0);
  struct stat st {};
  REQUIRE(fstat(fd, &st) == 0);
  PeerAddress a;
  a.fd = fd;
  a.inode = static_cast<uint64_t>(st.st_ino);
  a.pages = 1;
  a.base = 0x10000;
  PeerMappings maps;
  a.address = a.base + 100;
  CHECK(maps.locate(1, getpid(), a, 100) != nullptr);  // inside: mapped
  a.address = a.base - 4096;
  CHECK(maps.locate(1, getpid(), a, 4096) == nullptr);  // before the base
  a.base = 0;  // an offset of 2^64 - 4096 is then an address not below the base
  a.address = ~uint64_t{0} - 4095;
  CHECK(maps.locate(1, getpid(), a, 4096) == nullptr);  // wraps: would point 4096 bytes before the mapping
  a.base = 0x10000;
  a.address = a.base + 4000;
  CHECK(maps.locate(1, getpid(), a, 200) == nullptr);  // runs past the end
  close(fd);
}
