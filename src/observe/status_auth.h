// How a status query proves the communicator's session secret without
// sending it: the endpoint sends a fresh random challenge, the client
// answers with a keyed hash (SipHash-2-4, keyed by the secret) of the
// challenge and the communicator id. The secret itself never crosses the
// wire, so a client that watches or replays a query learns nothing it can
// use. The bootstrap's connections prove the same secret (src/bootstrap).
//
// The tool learns the secret from a key file that rank 0 of each
// communicator writes (mode 0600) when GYRE_STATUS_KEY_DIR is set:
// "<dir>/<communicator id>.key", one line "gyre-status-key <id> <secret>"
// in hexadecimal, removed at ncclCommDestroy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gyre::statusauth {

// The request line of a query authenticated by a communicator's secret
// ("GYRE-STATUS 2 <id>"), the endpoint's challenge line
// ("challenge <32 hex digits>") and the client's answer ("proof <16 hex>").
constexpr const char* kRequest2 = "GYRE-STATUS 2";

struct Challenge {
  uint64_t words[2];
};

// SipHash-2-4 of `n` little-endian 64-bit words under the key (k0, k1).
uint64_t sipHash24(uint64_t k0, uint64_t k1, const uint64_t* words, size_t n);

Challenge freshChallenge();
uint64_t proofOf(uint64_t secret, uint64_t commId, const Challenge& c);

std::string hex16(uint64_t v);
bool parseHex64(const std::string& text, uint64_t* out);
std::string challengeText(const Challenge& c);
bool parseChallenge(const std::string& text, Challenge* out);

// Key files.
std::string keyFileText(uint64_t commId, uint64_t secret);
// Reads a key file; false with *why set when it is missing or malformed.
// parseKeyFile checks the text of one (`path` only names it in *why).
constexpr size_t kKeyFileMaxBytes = 256;
bool parseKeyFile(const std::string& text, const std::string& path, uint64_t* commId, uint64_t* secret,
                  std::string* why);
bool readKeyFile(const std::string& path, uint64_t* commId, uint64_t* secret, std::string* why);

}  // namespace gyre::statusauth
