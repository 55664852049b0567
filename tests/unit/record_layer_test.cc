// The encrypted record layer and handshake (src/bootstrap/secure/): records
// checked against OpenSSL's AES-256-GCM used directly (the independent
// reference: key, base IV xor record number, the length as associated data),
// altered, replayed, reordered, cut and oversized streams refused, the
// handshake's refusals (another key, a replayed hello) named, and a socket
// stream of several records delivered exactly with no plaintext on the wire.
#include <catch2/catch.hpp>

#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "src/bootstrap/pending_hellos.h"
#include "src/bootstrap/secure/handshake.h"
#include "src/bootstrap/secure/protection.h"
#include "src/bootstrap/secure/record_channel.h"
#include "src/bootstrap/wire.h"

using namespace gyre;

namespace {

// Every connection in this file is between 127.0.0.1 and itself, which
// `auto` leaves clear: ask for encryption everywhere before gyre reads it.
const bool kEncryptOn = (setenv("GYRE_ENCRYPT", "on", 1), true);

DirectionKey keyOf(unsigned char seed) {
  DirectionKey k;
  for (size_t i = 0; i < sizeof(k.key); ++i) k.key[i] = static_cast<unsigned char>(seed + i);
  for (size_t i = 0; i < sizeof(k.iv); ++i) k.iv[i] = static_cast<unsigned char>(0xa0 + seed + i);
  return k;
}

// A sender and a receiver sharing one direction's key.
struct Pair {
  std::unique_ptr<RecordChannel> tx = RecordChannel::create();
  std::unique_ptr<RecordChannel> rx = RecordChannel::create();
  explicit Pair(unsigned char seed = 1) {
    REQUIRE(tx);
    REQUIRE(rx);
    REQUIRE(tx->setSendKey(keyOf(seed)));
    REQUIRE(rx->setRecvKey(keyOf(seed)));
  }
};

std::vector<unsigned char> bytesOf(const std::string& s) { return {s.begin(), s.end()}; }

// Decrypts record `seq` at `rec` with EVP directly.
bool referenceOpen(const DirectionKey& k, uint64_t seq, const unsigned char* rec, std::vector<unsigned char>* out) {
  const uint32_t len = rec[0] | rec[1] << 8 | rec[2] << 16 | static_cast<uint32_t>(rec[3]) << 24;
  unsigned char nonce[12];
  memcpy(nonce, k.iv, 12);
  for (int i = 0; i < 8; ++i) nonce[11 - i] ^= static_cast<unsigned char>(seq >> (8 * i));
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int n = 0;
  out->resize(len);
  bool ok = EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, k.key, nonce) == 1 &&
            EVP_DecryptUpdate(ctx, nullptr, &n, rec, 4) == 1 &&
            EVP_DecryptUpdate(ctx, out->data(), &n, rec + 4, static_cast<int>(len)) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, const_cast<unsigned char*>(rec + 4 + len)) == 1 &&
            EVP_DecryptFinal_ex(ctx, out->data() + len, &n) == 1;
  EVP_CIPHER_CTX_free(ctx);
  return ok;
}

bool contains(const std::vector<unsigned char>& hay, const std::string& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

}  // namespace

TEST_CASE("sealed records open with AES-256-GCM keyed by the direction's key and nonce base xor the record number",
          "[secure]") {
  REQUIRE(kEncryptOn);
  Pair p;
  std::vector<unsigned char> wire;
  const std::string first = "the first record", second = "and the second one, a little longer";
  REQUIRE(p.tx->seal(first.data(), first.size(), &wire));
  const size_t firstBytes = wire.size();
  REQUIRE(p.tx->seal(second.data(), second.size(), &wire));
  CHECK(firstBytes == 4 + first.size() + 16);
  CHECK_FALSE(contains(wire, first));
  std::vector<unsigned char> plain;
  REQUIRE(referenceOpen(keyOf(1), 0, wire.data(), &plain));
  CHECK(plain == bytesOf(first));
  REQUIRE(referenceOpen(keyOf(1), 1, wire.data() + firstBytes, &plain));
  CHECK(plain == bytesOf(second));
  // The record number is part of the nonce: record 1 does not open as record 0.
  CHECK_FALSE(referenceOpen(keyOf(1), 0, wire.data() + firstBytes, &plain));
  // And the channel itself, fed a byte at a time, gives back both in order.
  std::vector<unsigned char> got;
  for (unsigned char b : wire) REQUIRE(p.rx->open(&b, 1, &got));
  CHECK(got == bytesOf(first + second));
}

TEST_CASE("a record with one flipped bit, a replayed record and two swapped records each fail authentication",
          "[secure]") {
  const std::string a = "record zero", b = "record one";
  auto sealTwo = [&](Pair& p, size_t* split) {
    std::vector<unsigned char> wire;
    REQUIRE(p.tx->seal(a.data(), a.size(), &wire));
    *split = wire.size();
    REQUIRE(p.tx->seal(b.data(), b.size(), &wire));
    return wire;
  };
  size_t split = 0;
  {
    Pair p;
    std::vector<unsigned char> wire = sealTwo(p, &split);
    for (size_t bit : {size_t{0}, size_t{5 * 8 + 3}, (split - 1) * 8}) {  // length, ciphertext, tag
      Pair q;
      std::vector<unsigned char> w = sealTwo(q, &split), out;
      w[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
      CHECK_FALSE(q.rx->open(w.data(), w.size(), &out));
      CHECK(q.rx->problem().find("authentication failed") != std::string::npos);
      CHECK(out.empty());
      // Poisoned: even the intact rest is refused now.
      CHECK_FALSE(q.rx->open(w.data() + split, w.size() - split, &out));
    }
  }
  {
    Pair p;
    std::vector<unsigned char> wire = sealTwo(p, &split), out;
    std::vector<unsigned char> replay(wire.begin(), wire.begin() + static_cast<long>(split));
    REQUIRE(p.rx->open(replay.data(), replay.size(), &out));
    CHECK_FALSE(p.rx->open(replay.data(), replay.size(), &out));  // record 0 again where record 1 is due
    CHECK(p.rx->problem().find("record 1") != std::string::npos);
    CHECK(out == bytesOf(a));
  }
  {
    Pair p;
    std::vector<unsigned char> wire = sealTwo(p, &split), out;
    std::vector<unsigned char> swapped(wire.begin() + static_cast<long>(split), wire.end());
    swapped.insert(swapped.end(), wire.begin(), wire.begin() + static_cast<long>(split));
    CHECK_FALSE(p.rx->open(swapped.data(), swapped.size(), &out));
    CHECK(out.empty());
  }
  {
    Pair p(1), other(2);  // sealed with another key
    std::vector<unsigned char> wire, out;
    REQUIRE(other.tx->seal(a.data(), a.size(), &wire));
    CHECK_FALSE(p.rx->open(wire.data(), wire.size(), &out));
  }
}

TEST_CASE("a stream cut inside a record is reported as cut, one cut between records as a close, and a record "
          "announcing more than 64 KiB is refused", "[secure]") {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  Pair p;
  std::vector<unsigned char> wire;
  const std::string msg = "whole";
  REQUIRE(p.tx->seal(msg.data(), msg.size(), &wire));
  REQUIRE(p.tx->seal(msg.data(), msg.size(), &wire));
  const size_t cut = wire.size() - 3;  // the second record less its last 3 bytes
  REQUIRE(write(sv[0], wire.data(), cut) == static_cast<ssize_t>(cut));
  close(sv[0]);
  char buf[64];
  iovec v{buf, sizeof(buf)};
  CHECK(p.rx->recvv(sv[1], &v, 1) == static_cast<ssize_t>(msg.size()));
  errno = 0;
  CHECK(p.rx->recvv(sv[1], &v, 1) == -1);
  CHECK(errno == EPROTO);
  CHECK(p.rx->problem().find("cut") != std::string::npos);
  close(sv[1]);

  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  Pair q;
  wire.clear();
  REQUIRE(q.tx->seal(msg.data(), msg.size(), &wire));
  REQUIRE(write(sv[0], wire.data(), wire.size()) == static_cast<ssize_t>(wire.size()));
  close(sv[0]);
  CHECK(q.rx->recvv(sv[1], &v, 1) == static_cast<ssize_t>(msg.size()));
  CHECK(q.rx->recvv(sv[1], &v, 1) == 0);
  close(sv[1]);

  Pair r;
  const unsigned char huge[4] = {0x01, 0x00, 0x01, 0x00};  // 64 KiB + 1
  std::vector<unsigned char> out;
  CHECK_FALSE(r.rx->open(huge, sizeof(huge), &out));
  CHECK(r.rx->problem().find("more bytes than any gyre record") != std::string::npos);
}

TEST_CASE("3 MiB sent through a socket pair in records of at most 64 KiB arrive exactly, with no plaintext on the "
          "wire", "[secure]") {
  int a[2], b[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a) == 0);  // sender -> test (the wire)
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b) == 0);  // test -> receiver
  Pair p;
  const std::string marker = "PLAINTEXT-MARKER";
  std::vector<unsigned char> data(3 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(marker[i % marker.size()]);
  std::vector<unsigned char> got(data.size() + 7), wire;
  size_t sent = 0, received = 0;
  const Deadline deadline = Deadline::afterSeconds(20);
  while (received < data.size() && !deadline.expired()) {
    if (sent < data.size()) {
      // Two pieces per call, as the transports hand over a header and a payload.
      iovec iov[2] = {{data.data() + sent, std::min<size_t>(1000, data.size() - sent)}, {nullptr, 0}};
      if (sent + iov[0].iov_len < data.size()) iov[1] = {data.data() + sent + iov[0].iov_len, data.size() - sent - iov[0].iov_len};
      const ssize_t n = p.tx->sendv(a[0], iov, 2);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else {
        REQUIRE(errno == EAGAIN);
      }
    }
    unsigned char relay[65536];
    const ssize_t m = read(a[1], relay, sizeof(relay));
    if (m > 0) {
      wire.insert(wire.end(), relay, relay + m);
      REQUIRE(write(b[0], relay, static_cast<size_t>(m)) == m);
    }
    iovec out{got.data() + received, got.size() - received};
    const ssize_t n = p.rx->recvv(b[1], &out, 1);
    if (n > 0) received += static_cast<size_t>(n);
    else REQUIRE(errno == EAGAIN);
  }
  REQUIRE(received == data.size());
  CHECK(std::equal(data.begin(), data.end(), got.begin()));
  // The wire is records of at most 64 KiB each, back to back.
  size_t records = 0, at = 0;
  bool bounded = true;
  while (at + 4 <= wire.size()) {
    const size_t len = wire[at] | wire[at + 1] << 8 | wire[at + 2] << 16 | size_t{wire[at + 3]} << 24;
    bounded = bounded && len <= kMaxRecordPlaintext;
    at += 4 + len + 16;
    ++records;
  }
  CHECK(bounded);
  CHECK(at == wire.size());
  CHECK(records >= data.size() / kMaxRecordPlaintext);
  CHECK_FALSE(contains(wire, marker));
  for (int fd : {a[0], a[1], b[0], b[1]}) close(fd);
}

namespace {

// A caller and a listener over a socket pair, each with its own secret.
struct Handshake {
  Socket caller, listener;
  std::string refusal;
  bool accepted = false;

  Handshake(uint64_t callerSecret, uint64_t listenerSecret) {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    caller = Socket(sv[0]);
    listener = Socket(sv[1]);
    const NetAddress where;
    const LinkSecret mine{callerSecret, true, LinkPurpose::Session};
    const LinkSecret theirs{listenerSecret, true, LinkPurpose::Session};
    REQUIRE(secureConnect(caller, mine, where, Deadline::afterSeconds(5), nullptr, "the listener") == ncclSuccess);
    ConnHello hello{};
    memcpy(hello.magic, kConnHelloMagic, sizeof(hello.magic));
    hello.fromRank = 3;
    REQUIRE(caller.sendAll(&hello, sizeof(hello), Deadline::afterSeconds(5), nullptr, "hello") == ncclSuccess);
    SecureHello callerHello{};
    REQUIRE(listener.recvAll(&callerHello, sizeof(callerHello), Deadline::afterSeconds(5), nullptr, "hello") ==
            ncclSuccess);
    uint32_t status = 0;
    std::unique_ptr<RecordChannel> ch = secureListen(theirs, listenerIdOf(theirs, where), callerHello, &refusal,
                                                     &status);
    REQUIRE(ch);
    ConnHello got{};
    iovec v{&got, sizeof(got)};
    ssize_t n = -1;
    const Deadline d = Deadline::afterSeconds(5);
    while ((n = ch->recvv(listener.fd(), &v, 1)) < 0 && errno == EAGAIN && !d.expired()) usleep(1000);
    if (n == static_cast<ssize_t>(sizeof(got))) {
      CHECK(got.fromRank == 3);
      accepted = secureAccept(listener, theirs, callerHello, std::move(ch), &refusal);
    } else {
      refusal = ch->problem();
      secureRefuse(listener, kSecureBadKey);
    }
  }
};

}  // namespace

TEST_CASE("the handshake gives both sides each other's data when they share the secret, and a caller with another "
          "secret is told authentication failed", "[secure]") {
  {
    Handshake h(0x1234, 0x1234);
    REQUIRE(h.accepted);
    const char up[] = "from the caller", down[] = "from the listener";
    REQUIRE(h.caller.sendAll(up, sizeof(up), Deadline::afterSeconds(5), nullptr, "up") == ncclSuccess);
    REQUIRE(h.listener.sendAll(down, sizeof(down), Deadline::afterSeconds(5), nullptr, "down") == ncclSuccess);
    char a[sizeof(up)], b[sizeof(down)];
    REQUIRE(h.listener.recvAll(a, sizeof(a), Deadline::afterSeconds(5), nullptr, "up") == ncclSuccess);
    REQUIRE(h.caller.recvAll(b, sizeof(b), Deadline::afterSeconds(5), nullptr, "down") == ncclSuccess);
    CHECK(std::string(a) == up);
    CHECK(std::string(b) == down);
  }
  {
    Handshake h(0x1234, 0x9999);
    CHECK_FALSE(h.accepted);
    CHECK(h.refusal.find("authentication failed") != std::string::npos);
    char c;
    CHECK(h.caller.recvAll(&c, 1, Deadline::afterSeconds(5), nullptr, "rank 1 (host-b)") != ncclSuccess);
    const std::string err = lastErrorText();
    CHECK(err.find("rank 1 (host-b)") != std::string::npos);
    CHECK(err.find("authentication failed") != std::string::npos);
  }
}

TEST_CASE("a listener refuses a caller's encrypted hello and first record replayed on a new connection",
          "[secure]") {
  // The caller's first flight, as it went out.
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
  Socket caller(sv[0]);
  Socket wireEnd(sv[1]);
  Socket listenSock;
  NetAddress bound;
  NetAddress loopback;
  std::string why;
  REQUIRE(NetAddress::parse("127.0.0.1:1", &loopback, &why));
  loopback.setPort(0);
  REQUIRE(Socket::listenOn(loopback, &listenSock, &bound) == ncclSuccess);
  const LinkSecret link{0x5eed, true, LinkPurpose::Session};
  REQUIRE(secureConnect(caller, link, bound, Deadline::afterSeconds(5), nullptr, "listener") == ncclSuccess);
  ConnHello hello{};
  memcpy(hello.magic, kConnHelloMagic, sizeof(hello.magic));
  hello.secret = link.secret;
  hello.fromRank = 1;
  hello.tag = 7;
  REQUIRE(caller.sendAll(&hello, sizeof(hello), Deadline::afterSeconds(5), nullptr, "hello") == ncclSuccess);
  std::vector<unsigned char> flight(4096);
  const ssize_t n = read(wireEnd.fd(), flight.data(), flight.size());
  REQUIRE(n > static_cast<ssize_t>(sizeof(SecureHello)));
  flight.resize(static_cast<size_t>(n));

  PendingHellos<ConnHello> pending;
  pending.setLink(&link, listenerIdOf(link, bound));
  std::vector<std::string> outcomes;
  for (int copy = 0; copy < 2; ++copy) {
    Socket out;
    REQUIRE(Socket::connectTo(bound, Deadline::afterSeconds(5), nullptr, &out, "replay") == ncclSuccess);
    REQUIRE(out.sendAll(flight.data(), flight.size(), Deadline::afterSeconds(5), nullptr, "replay") == ncclSuccess);
    Socket in;
    NetAddress from;
    REQUIRE(listenSock.acceptOne(&in, &from, Deadline::afterSeconds(5), nullptr, "accept") == ncclSuccess);
    pending.add(std::move(in), from, 5.0);
    const Deadline d = Deadline::afterSeconds(5);
    const size_t before = outcomes.size();
    while (outcomes.size() == before && !d.expired()) {
      pending.poll([&](Socket&, const NetAddress&, const ConnHello& h, bool complete, const std::string& refusal) {
        outcomes.push_back(refusal.empty() && complete && h.tag == 7 ? "accepted" : refusal);
      });
      usleep(1000);
    }
  }
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0] == "accepted");
  CHECK(outcomes[1].find("replay") != std::string::npos);
}
