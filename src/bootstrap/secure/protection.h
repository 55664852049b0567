// Whether a connection gyre owns is encrypted, and with what key material.
//
// GYRE_ENCRYPT (auto, on, off) says which connections: `auto` encrypts those
// between hosts (same-host ones cross no wire and keep their speed), `on`
// every one, `off` none. Keys come from a LinkSecret, the secret both ends of
// one kind of connection share: the unique id's random secret for the
// rendezvous, the root's session secret for rank-to-rank connections, each
// mixed with the user's key when one is set (gyreSetEncryptionKey or
// GYRE_ENCRYPT_KEY_FILE). With NCCL_COMM_ID the id's secret is derived from an
// address and a job id, not random, so without a user key there is nothing to
// key with: `auto` stays clear (and warns), `on` fails.
//
// Both ends decide from the same facts (the connection's two addresses, the
// same settings on every rank), so they agree without asking each other; a
// peer that disagrees is refused with the reason (handshake.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "include/gyre.h"

namespace gyre {

enum class LinkPurpose : uint32_t { Rendezvous = 1, Session = 2 };

struct LinkSecret {
  uint64_t secret = 0;
  // False when the secret is no secret from the network (NCCL_COMM_ID's
  // derived one, or a session secret that crossed the network in the clear).
  bool random = true;
  LinkPurpose purpose = LinkPurpose::Session;
};

enum class EncryptMode { Auto, On, Off };

// GYRE_ENCRYPT (read once; an unknown value reads as auto, and validation
// at init reports it).
EncryptMode encryptMode();
const char* encryptModeName(EncryptMode m);

// Whether this build has OpenSSL 3's libcrypto (meson option `openssl`).
bool cryptoBuilt();

// The user's key: set from the program, replacing (and wiping) any earlier
// one. Fails with ncclInvalidUsage without libcrypto, ncclInvalidArgument
// for a key outside 16..4096 bytes; key = NULL with bytes = 0 clears it.
ncclResult_t setUserKey(const void* key, size_t bytes);
// The key set from the program, else GYRE_ENCRYPT_KEY_FILE's contents (read
// at first use). *have = false when neither is set. Fails if the file is set
// but unreadable or of the wrong size.
ncclResult_t userKey(std::vector<unsigned char>* out, bool* have);
// Wipes the key held in memory (process exit, tests).
void wipeUserKey();

// Whether the connection on `fd` (connected) is to be encrypted under the
// settings, keyed by `link`. Fails, naming why, when encryption is required
// and impossible (no libcrypto, no key). `what` prefixes messages.
ncclResult_t chooseProtection(int fd, const LinkSecret& link, bool* encrypt, const char* what);

// Fails as chooseProtection would for a connection between hosts: called
// before anything waits on others (a rank that hosts the rendezvous must not
// start a root it can never join).
ncclResult_t checkProtectionPossible(const LinkSecret& link, const char* what);

// The two ends of `fd` are on one host (one address, or loopback).
bool sameHostConnection(int fd);

// Overwrites `bytes` at `p` in a way the compiler keeps (OPENSSL_cleanse
// where built with it).
void wipe(void* p, size_t bytes);

}  // namespace gyre
