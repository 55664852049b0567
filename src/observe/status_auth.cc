#include "src/observe/status_auth.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace gyre::statusauth {
namespace {

uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct SipState {
  uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
  void absorb(uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

}  // namespace

uint64_t sipHash24(uint64_t k0, uint64_t k1, const uint64_t* words, size_t n) {
  SipState s{k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull, k0 ^ 0x6c7967656e657261ull,
             k1 ^ 0x7465646279746573ull};
  for (size_t i = 0; i < n; ++i) s.absorb(words[i]);
  s.absorb(static_cast<uint64_t>(n * 8) << 56);  // the length byte, no tail bytes
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

Challenge freshChallenge() {
  Challenge c{};
  if (getrandom(c.words, sizeof c.words, 0) != static_cast<ssize_t>(sizeof c.words)) {
    // No entropy source: a challenge that never repeats in this process
    // still defeats replay, which is what it is for.
    static uint64_t counter = 0;
    c.words[0] = static_cast<uint64_t>(time(nullptr)) ^ (static_cast<uint64_t>(getpid()) << 32);
    c.words[1] = ++counter;
  }
  return c;
}

uint64_t proofOf(uint64_t secret, uint64_t commId, const Challenge& c) {
  // The second key word separates this use of the secret from any other.
  const uint64_t words[3] = {c.words[0], c.words[1], commId};
  return sipHash24(secret, 0x6779726573746174ull /* "gyrestat" */, words, 3);
}

std::string hex16(uint64_t v) {
  char buf[17];
  snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

bool parseHex64(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 16) return false;
  uint64_t v = 0;
  for (char ch : text) {
    int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

std::string challengeText(const Challenge& c) { return hex16(c.words[0]) + hex16(c.words[1]); }

bool parseChallenge(const std::string& text, Challenge* out) {
  return text.size() == 32 && parseHex64(text.substr(0, 16), &out->words[0]) &&
         parseHex64(text.substr(16), &out->words[1]);
}

std::string keyFileText(uint64_t commId, uint64_t secret) {
  return "gyre-status-key " + hex16(commId) + " " + hex16(secret) + "\n";
}

bool parseKeyFile(const std::string& text, const std::string& path, uint64_t* commId, uint64_t* secret,
                  std::string* why) {
  std::istringstream in(text);
  std::string magic, id, key;
  in >> magic >> id >> key;
  if (magic != "gyre-status-key" || !parseHex64(id, commId) || !parseHex64(key, secret)) {
    *why = "the key file " + path + " is not a gyre status key (expected 'gyre-status-key <id> <secret>')";
    return false;
  }
  return true;
}

bool readKeyFile(const std::string& path, uint64_t* commId, uint64_t* secret, std::string* why) {
  std::ifstream in(path);
  if (!in) {
    *why = "cannot read the key file " + path + ": " + strerror(errno);
    return false;
  }
  // A key file is one short line; a larger file is not one, and is not read whole.
  std::string text(kKeyFileMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kKeyFileMaxBytes) {
    *why = "the key file " + path + " is not a gyre status key (longer than " + std::to_string(kKeyFileMaxBytes) +
           " bytes)";
    return false;
  }
  return parseKeyFile(text, path, commId, secret, why);
}

}  // namespace gyre::statusauth
