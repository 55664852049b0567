// The handshake that makes a connected socket an encrypted one (record_channel.h).
//
//   caller   -> listener: SecureHello ("GYRESEC>", key source, 32 random bytes)
//                         then at once its records (the connection's first
//                         message, ConnHello or RootHello, is record 0)
//   listener -> caller  : SecureHello ("GYRESEC<", status, 32 random bytes)
//                         then record 0: a key confirmation, then its records
//
// The caller does not wait for the answer before it sends: every rank
// connects all its outgoing connections before it accepts any, so a caller
// waiting here could deadlock a ring. Its direction's key therefore comes
// from its own random bytes, the shared secret (LinkSecret, with the user's
// key when set) and the listener's address; the listener refuses a caller's
// random bytes it has seen before, so a recorded connection replayed to it
// (or, bound to its address, to another rank) fails. The listener reads and
// authenticates the caller's first record before it answers, so a caller with
// another key is refused (status "authentication failed") and never handed to
// anyone. The listener's direction is keyed from both sides' random bytes
// and both hellos; the caller checks it on its first read, where a refusal
// also shows. Keys come from HKDF-SHA256; neither hello carries anything secret.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "src/bootstrap/secure/protection.h"
#include "src/bootstrap/secure/record_channel.h"
#include "src/bootstrap/socket.h"

namespace gyre {

struct SecureHello {
  char magic[8];
  uint32_t version;
  uint32_t keySource;  // 1: a user key is mixed in; 0: the shared secret alone
  uint32_t status;     // listener's answer: SecureStatus
  uint32_t reserved;
  unsigned char random[32];
};
static_assert(sizeof(SecureHello) == 56);

enum SecureStatus : uint32_t {
  kSecureAccepted = 0,
  kSecureBadKey = 1,       // the caller's first record failed authentication
  kSecureKeySource = 2,    // one side has a user key, the other not
  kSecureReplayed = 3,     // random bytes seen before
  kSecureMalformed = 4,
};

constexpr char kSecureCallerMagic[8] = {'G', 'Y', 'R', 'E', 'S', 'E', 'C', '>'};
constexpr char kSecureListenerMagic[8] = {'G', 'Y', 'R', 'E', 'S', 'E', 'C', '<'};
constexpr uint32_t kSecureVersion = 1;

// The caller's side, on a socket just connected to `listener` (the address
// it dialed). Sends the hello and encrypts the socket without waiting;
// `peerName` ("rank 3 at 10.0.0.2:4711") goes into later errors.
ncclResult_t secureConnect(Socket& s, const LinkSecret& link, const NetAddress& listener, const Deadline& deadline,
                           const std::atomic<bool>* abort, const std::string& peerName);

// The listener's side, in two steps. After the caller's hello: a channel
// that can read the caller's records, or null with *why and *status.
std::unique_ptr<RecordChannel> secureListen(const LinkSecret& link, const std::string& listenerId,
                                            const SecureHello& caller, std::string* why, uint32_t* status);
// After the caller's first record authenticated: sends the answer and the
// confirmation and encrypts the socket with `channel`. False with *why.
bool secureAccept(Socket& s, const LinkSecret& link, const SecureHello& caller,
                  std::unique_ptr<RecordChannel> channel, std::string* why);
// Tells a caller why it is refused (best effort; nothing secret in it).
void secureRefuse(Socket& s, uint32_t status);

// The address as the listener's id in the caller's key ("" for the rendezvous,
// whose secret is the root's alone).
std::string listenerIdOf(const LinkSecret& link, const NetAddress& listener);

// Fills `random` with bytes from OpenSSL's generator. False without libcrypto.
bool secureRandom(unsigned char* random, size_t bytes);

}  // namespace gyre
