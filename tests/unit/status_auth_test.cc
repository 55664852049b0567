// The status endpoint's proof of a communicator's secret
// (src/observe/status_auth.h): SipHash-2-4 against the reference vectors of
// its authors' paper (key 00..0f, messages 00..07 and 00..0f), a proof that
// changes with every bit of the secret, the challenge and the id, and the
// text forms and key files read back or refused.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "src/observe/status_auth.h"

using namespace gyre::statusauth;

TEST_CASE("SipHash-2-4 of whole words matches the reference vectors", "[status]") {
  const uint64_t k0 = 0x0706050403020100ull, k1 = 0x0f0e0d0c0b0a0908ull;
  const uint64_t words[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  CHECK(sipHash24(k0, k1, words, 0) == 0x726fdb47dd0e0e31ull);  // the empty message
  CHECK(sipHash24(k0, k1, words, 1) == 0x93f5f5799a932462ull);  // 8 bytes
  CHECK(sipHash24(k0, k1, words, 2) == 0x3f2acc7f57c29bdbull);  // 16 bytes
}

TEST_CASE("a status proof changes with every bit of the secret, the challenge and the id", "[status]") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const uint64_t secret = rng(), id = rng();
    const Challenge c{{rng(), rng()}};
    const uint64_t proof = proofOf(secret, id, c);
    CHECK(proofOf(secret, id, c) == proof);
    for (int bit = 0; bit < 64; ++bit) {
      const uint64_t flip = uint64_t{1} << bit;
      CHECK(proofOf(secret ^ flip, id, c) != proof);
      CHECK(proofOf(secret, id ^ flip, c) != proof);
      CHECK(proofOf(secret, id, Challenge{{c.words[0] ^ flip, c.words[1]}}) != proof);
      CHECK(proofOf(secret, id, Challenge{{c.words[0], c.words[1] ^ flip}}) != proof);
    }
  }
  const Challenge a = freshChallenge(), b = freshChallenge();
  CHECK((a.words[0] != b.words[0] || a.words[1] != b.words[1]));
}

TEST_CASE("status auth texts read back, and malformed ones are refused", "[status]") {
  uint64_t v = 0;
  CHECK(hex16(0x00ab) == "00000000000000ab");
  REQUIRE(parseHex64("00000000000000AB", &v));
  CHECK(v == 0xab);
  CHECK_FALSE(parseHex64("", &v));
  CHECK_FALSE(parseHex64("12345678901234567", &v));  // 17 digits
  CHECK_FALSE(parseHex64("xyz", &v));
  const Challenge c{{0x0123456789abcdefull, 0xfedcba9876543210ull}};
  Challenge back{};
  REQUIRE(parseChallenge(challengeText(c), &back));
  CHECK(back.words[0] == c.words[0]);
  CHECK(back.words[1] == c.words[1]);
  CHECK_FALSE(parseChallenge("0123", &back));

  char path[] = "/tmp/gyre-status-key-test-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  uint64_t id = 0, secret = 0;
  std::string why;
  std::ofstream(path) << keyFileText(0x5d1c0f3e2a9b4410ull, 0x1122334455667788ull);
  REQUIRE(readKeyFile(path, &id, &secret, &why));
  CHECK(id == 0x5d1c0f3e2a9b4410ull);
  CHECK(secret == 0x1122334455667788ull);
  std::ofstream(path) << "hello world\n";
  CHECK_FALSE(readKeyFile(path, &id, &secret, &why));
  CHECK(why.find("is not a gyre status key") != std::string::npos);
  unlink(path);
  CHECK_FALSE(readKeyFile(path, &id, &secret, &why));
  CHECK(why.find("cannot read the key file") != std::string::npos);
}
