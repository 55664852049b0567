// Records the seed corpora of tests/fuzz/corpus: real messages made by
// gyre's own code. A rendezvous of 2 and of 3 ranks runs in this process
// (joinRendezvous in threads, serveRendezvous as the root) through a relay
// that keeps every byte each way: the hellos the root reads and the reply
// and peer table each rank reads. The other records are made by the
// functions that make them for the wire (encodeUniqueId, makeSlotMeta, the
// status key file and proof) with the values a test run uses.
//
//   record_seeds OUTDIR      writes OUTDIR/TARGET/NAME files
//
// (Run with ASAN_OPTIONS=detect_leaks=0: env::reloadForTesting, which the
// NCCL_COMM_ID ids need, keeps its earlier settings alive by design.)
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/rendezvous.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/observe/status_auth.h"
#include "src/sched/slot_meta.h"
#include "src/transport/ib/ib_records.h"
#include "src/transport/socket/socket_wire.h"
#include "tests/fuzz/slot_meta_input.h"

using namespace gyre;

namespace {

std::string gOut;

void save(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = gOut + "/" + target;
  mkdir(gOut.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  FILE* f = fopen((dir + "/" + name).c_str(), "wb");
  if (!f || fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    fprintf(stderr, "record_seeds: cannot write %s/%s\n", dir.c_str(), name.c_str());
    exit(1);
  }
  fclose(f);
}

template <typename T>
std::string bytesOf(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

NetAddress loopback() {
  NetAddress a;
  std::string why;
  if (!NetAddress::parse("127.0.0.1:1", &a, &why)) exit(1);
  a.setPort(0);
  return a;
}

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    fprintf(stderr, "record_seeds: %s failed: %s\n", what, lastErrorText());
    exit(1);
  }
}

// One rendezvous of `nranks` ranks through the relay; returns the hellos
// (in arrival order) and each rank's reply with its table.
void recordRendezvous(int nranks) {
  const Deadline deadline = Deadline::afterSeconds(20);
  Socket rootListener, relay;
  NetAddress rootAddr, relayAddr;
  check(Socket::listenOn(loopback(), &rootListener, &rootAddr), "root listen");
  check(Socket::listenOn(loopback(), &relay, &relayAddr), "relay listen");
  const uint64_t secret = randomSecret();
  std::thread root(serveRendezvous, std::move(rootListener), secret, 20.0);

  // The ranks, as comm init makes them, reporting to the relay.
  UniqueIdContents id;
  id.root = relayAddr;
  id.secret = secret;
  std::vector<std::thread> ranks;
  std::vector<Socket> rankListeners(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    NetAddress listen;
    check(Socket::listenOn(loopback(), &rankListeners[static_cast<size_t>(r)], &listen), "rank listen");
    ranks.emplace_back([&, r, listen] {
      PeerInfo self{};
      self.rank = r;
      self.pid = getpid();
      self.hostHash = fnv1a("gyre-fuzz-host", 14);
      self.listen = listen.toWire();
      gethostname(self.host, sizeof(self.host) - 1);
      self.cudaDev = -1;
      self.isHostComm = 1;
      self.buffSize = 4 << 20;
      self.numaNode = 0;
      self.busId = -1;
      std::vector<PeerInfo> peers;
      uint64_t session = 0;
      check(joinRendezvous({id}, r, nranks, self, deadline, deadline, nullptr, &peers, &session), "join");
    });
  }
  // The relay: each rank's hello on to the root, the root's answer back.
  std::string hellos;
  std::vector<std::pair<Socket, Socket>> pairs;
  for (int r = 0; r < nranks; ++r) {
    Socket fromRank, toRoot;
    NetAddress from;
    check(relay.acceptOne(&fromRank, &from, deadline, nullptr, "relay accept"), "relay accept");
    RootHello hello;
    check(fromRank.recvAll(&hello, sizeof(hello), deadline, nullptr, "relay hello"), "relay hello");
    hellos += bytesOf(hello);
    check(Socket::connectTo(rootAddr, deadline, nullptr, &toRoot, "relay to root"), "relay connect");
    check(toRoot.sendAll(&hello, sizeof(hello), deadline, nullptr, "relay hello"), "relay hello");
    pairs.emplace_back(std::move(fromRank), std::move(toRoot));
  }
  for (auto& [fromRank, toRoot] : pairs) {
    RootReply reply;
    check(toRoot.recvAll(&reply, sizeof(reply), deadline, nullptr, "relay reply"), "relay reply");
    std::vector<PeerInfo> table(static_cast<size_t>(nranks));
    check(toRoot.recvAll(table.data(), table.size() * sizeof(PeerInfo), deadline, nullptr, "relay table"),
          "relay table");
    check(fromRank.sendAll(&reply, sizeof(reply), deadline, nullptr, "relay reply"), "relay reply");
    check(fromRank.sendAll(table.data(), table.size() * sizeof(PeerInfo), deadline, nullptr, "relay table"),
          "relay table");
    const std::string answer = bytesOf(reply) + std::string(reinterpret_cast<const char*>(table.data()),
                                                            table.size() * sizeof(PeerInfo));
    save("root_reply", "ok-" + std::to_string(nranks) + "-ranks", std::string(1, static_cast<char>(nranks - 1)) + answer);
  }
  for (std::thread& t : ranks) t.join();
  root.join();
  save("root_hello", "hellos-" + std::to_string(nranks) + "-ranks", hellos);
  // A rank that names another rank's number twice: the second hello of a
  // two-rank rendezvous sent again.
  save("root_hello", "duplicate-rank", hellos.substr(0, sizeof(RootHello)) + hellos.substr(0, sizeof(RootHello)));
}

// What the root answers a hello without the id's secret.
void recordRefusal() {
  const Deadline deadline = Deadline::afterSeconds(10);
  Socket listener;
  NetAddress addr;
  check(Socket::listenOn(loopback(), &listener, &addr), "root listen");
  std::thread root(serveRendezvous, std::move(listener), randomSecret(), 1.0);
  Socket s;
  check(Socket::connectTo(addr, deadline, nullptr, &s, "refused hello"), "connect");
  RootHello hello{};
  memcpy(hello.magic, kRootHelloMagic, sizeof(hello.magic));
  hello.secret = 1;
  hello.nranks = 2;
  hello.nRoots = 1;
  check(s.sendAll(&hello, sizeof(hello), deadline, nullptr, "hello"), "hello");
  RootReply reply;
  check(s.recvAll(&reply, sizeof(reply), deadline, nullptr, "reply"), "reply");
  save("root_reply", "refused", std::string(1, 1) + bytesOf(reply));
  // The root waits on for a rank with the secret, as a ncclGetUniqueId root
  // does; it ends with this process.
  root.detach();
}

void recordUniqueIds() {
  for (const char* text : {"127.0.0.1:29500", "[::1]:29500"}) {
    setenv("NCCL_COMM_ID", text, 1);
    env::reloadForTesting("/nonexistent/nccl.conf");
    bool used = false;
    ncclUniqueId id;
    check(uniqueIdFromCommIdEnv(&used, &id), "uniqueIdFromCommIdEnv");
    save("unique_id", std::string("comm-id-") + (text[0] == '[' ? "v6" : "v4"), bytesOf(id) + text);
  }
  unsetenv("NCCL_COMM_ID");
  UniqueIdContents c;
  NetAddress::parse("10.1.2.3:40123", &c.root, nullptr);
  c.secret = randomSecret();
  ncclUniqueId id;
  encodeUniqueId(c, &id);
  save("unique_id", "get-unique-id", bytesOf(id) + "node7:29500");
  c.hostGrow = true;
  encodeUniqueId(c, &id);
  save("unique_id", "grow-id", bytesOf(id) + "[fe80::1%lo]:1");
}

void recordConfig() {
  // The config test's file, and settings of each kind.
  save("config", "test-file",
       "# comment\n\nNCCL_DEBUG=INFO\n  NCCL_BUFFSIZE = 8M  \nNCCL_SOCKET_IFNAME=\"eth0\"\njust words\n=5\nNCCL_ALGO=\n");
  save("config", "system-file", "NCCL_BUFFSIZE=1M\nNCCL_MIN_NCHANNELS=2\nNCCL_DEBUG_FILE=/tmp/sys.log\n");
  save("config", "typos", "NCCL_MAX_NCHANELS=4\nNCCL_SOMETHING_ELSE_ENTIRELY=1\nbroken line\n");
  save("config", "choices", "NCCL_P2P_LEVEL=FAR\nNCCL_PROTO=Simple\nGYRE_TIMEOUT=30\nNCCL_IB_DISABLE=1\n");
}

void recordStatus() {
  const uint64_t commId = 0x1234abcd5678ef90ull, secret = 0x0badc0ffee15600dull;
  const statusauth::Challenge c = statusauth::freshChallenge();
  save("status", "request-local", "GYRE-STATUS 1\n");
  save("status", "request-with-secret", std::string(statusauth::kRequest2) + " " + statusauth::hex16(commId) +
                                            "\nproof " + statusauth::hex16(statusauth::proofOf(secret, commId, c)) +
                                            "\n");
  save("status", "key-file", statusauth::keyFileText(commId, secret));
  save("status", "challenge", statusauth::challengeText(c));
}

void recordSlotMeta() {
  using Own = fuzz::OwnStep;
  const CollKind colls[] = {CollKind::AllReduce, CollKind::Broadcast, CollKind::AllGather, CollKind::SendRecv};
  for (CollKind coll : colls) {
    LaneSpec spec;
    spec.rank = 1;
    spec.coll = coll;
    spec.datatype = ncclFloat32;
    spec.op = ncclSum;
    spec.count = 1000;
    spec.opCount = 7;
    spec.root = coll == CollKind::Broadcast ? 0 : -1;
    Own own{7, 1000, 4000, spec.root, 1, 0, 1 << 19, static_cast<uint8_t>(coll), ncclFloat32, ncclSum};
    const SlotMeta sent = makeSlotMeta(spec, 4000);
    std::string name = std::string("step-") + collName(coll);
    std::replace(name.begin(), name.end(), '/', '-');
    save("slot_meta", name, bytesOf(own) + bytesOf(sent));
  }
  // The abort notice a socket sender writes: rank 2 is blamed.
  SlotMeta notice{};
  notice.flags = kMetaAbort;
  notice.count = 2;
  Own own{7, 1000, 4000, -1, 1, 0, 1 << 19, 0, ncclFloat32, ncclSum};
  save("slot_meta", "abort-notice", bytesOf(own) + bytesOf(notice));
}

void recordNetHandshake() {
  // This rank's settings byte (2 threads x 1 socket, 4 KiB << 2 steps), the
  // sender's parameters, an IB handle as listen() writes it, a QpInfo.
  const uint8_t mine = 1 | (0 << 3) | (2 << 6);
  const socket_detail::SocketParams params{16384, 2, 1};
  Socket listener;
  NetAddress bound;
  check(Socket::listenOn(loopback(), &listener, &bound), "listen");
  const ib::Handle handle{ib::kRecordMagic, bound.toWire()};
  ib::QpInfo qp{};
  qp.magic = ib::kRecordMagic;
  qp.nqps = 2;
  qp.qpn[0] = 0x1a2;
  qp.qpn[1] = 0x1a3;
  qp.lid = 3;
  qp.linkLayer = IBV_LINK_LAYER_INFINIBAND;
  qp.mtu = IBV_MTU_4096;
  qp.fifoAddr = 0x7f0000001000;
  qp.fifoRkey = 0x55;
  save("net_handshake", "socket-and-ib", std::string(1, static_cast<char>(mine)) + bytesOf(params) + bytesOf(handle) +
                                             bytesOf(qp));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: record_seeds OUTDIR\n");
    return 2;
  }
  gOut = argv[1];
  recordRendezvous(2);
  recordRendezvous(3);
  recordRefusal();
  recordUniqueIds();
  recordConfig();
  recordStatus();
  recordSlotMeta();
  recordNetHandshake();
  return 0;
}
