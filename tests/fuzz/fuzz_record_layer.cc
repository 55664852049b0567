// The encrypted connections' parsers (src/bootstrap/secure/): the record
// stream, the listener's answer a caller reads first, and a listener's
// reading of a caller's hello and first record (PendingHellos with
// GYRE_ENCRYPT=on). The first byte picks which; the rest is what the peer
// sent. Properties: records sealed here open to exactly what was sealed,
// and any change to the stream fails; nothing crashes or hangs on any input.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "src/bootstrap/pending_hellos.h"
#include "src/bootstrap/secure/handshake.h"
#include "src/bootstrap/secure/record_channel.h"
#include "src/bootstrap/wire.h"
#include "tests/fuzz/fuzz_input.h"

using namespace gyre;

namespace {

DirectionKey fixedKey() {
  DirectionKey k;
  for (size_t i = 0; i < sizeof(k.key); ++i) k.key[i] = static_cast<unsigned char>(i * 7 + 1);
  for (size_t i = 0; i < sizeof(k.iv); ++i) k.iv[i] = static_cast<unsigned char>(i * 13 + 5);
  return k;
}

// Seals the input as records, lets the input flip one byte of the stream
// (or none), and reopens it in input-chosen pieces.
void roundTrip(fuzz::Input& in) {
  const uint16_t flipAt = in.take<uint16_t>();
  const uint8_t flipMask = in.take<uint8_t>();
  const uint8_t piece = in.take<uint8_t>();
  const std::string plain = in.rest();
  auto tx = RecordChannel::create(), rx = RecordChannel::create();
  if (!tx || !rx || !tx->setSendKey(fixedKey()) || !rx->setRecvKey(fixedKey())) __builtin_trap();
  std::vector<unsigned char> wire;
  for (size_t at = 0; at < plain.size(); at += 97)  // several small records
    if (!tx->seal(plain.data() + at, std::min<size_t>(97, plain.size() - at), &wire)) __builtin_trap();
  const bool flipped = !wire.empty() && flipMask != 0;
  if (flipped) wire[flipAt % wire.size()] ^= flipMask;
  std::vector<unsigned char> got;
  bool ok = true;
  const size_t step = 1 + piece;
  for (size_t at = 0; at < wire.size() && ok; at += step)
    ok = rx->open(wire.data() + at, std::min(step, wire.size() - at), &got);
  if (!flipped && (!ok || got.size() != plain.size() || (!got.empty() && memcmp(got.data(), plain.data(), got.size()))))
    __builtin_trap();
  if (flipped && ok && got.size() == plain.size()) __builtin_trap();  // a change went unnoticed
}

// Bytes from a peer on a socket pair, read by `reader` until it ends.
template <typename Reader>
void fromPeer(const std::string& bytes, Reader&& reader) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) return;
  const size_t n = std::min<size_t>(bytes.size(), 100000);
  if (n > 0 && write(sv[1], bytes.data(), n) < 0) {
  }
  close(sv[1]);
  reader(Socket(sv[0]));
}

// A caller reading the listener's answer and records.
void callerReads(const std::string& bytes) {
  fromPeer(bytes, [](Socket s) {
    const LinkSecret link{42, true, LinkPurpose::Session};
    if (secureConnect(s, link, NetAddress(), Deadline::afterSeconds(1), nullptr, "fuzz") != ncclSuccess) return;
    char buf[4096];
    for (int i = 0; i < 1000; ++i) {
      const iovec v{buf, sizeof(buf)};
      if (s.recvv(&v, 1) <= 0) return;
    }
  });
}

// A listener reading a caller's hello and first record.
void listenerReads(const std::string& bytes) {
  fromPeer(bytes, [](Socket s) {
    const LinkSecret link{42, true, LinkPurpose::Session};
    PendingHellos<ConnHello> pending;
    pending.setLink(&link, "fuzz");
    pending.add(std::move(s), NetAddress(), 1.0);
    for (int i = 0; i < 1000 && !pending.empty(); ++i)
      pending.poll([](Socket&, const NetAddress&, const ConnHello&, bool, const std::string&) {});
  });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("GYRE_ENCRYPT", "on", 1);
  setenv("NCCL_DEBUG", "VERSION", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  switch (in.take<uint8_t>() % 3) {
    case 0: roundTrip(in); break;
    case 1: callerReads(in.rest()); break;
    default: listenerReads(in.rest()); break;
  }
  return 0;
}
