#include "src/bootstrap/secure/handshake.h"

#include <cstring>
#include <vector>

#include "gyre_crypto_config.h"  // GYRE_HAVE_OPENSSL, from meson.build
#include "src/debug/error.h"

#if GYRE_HAVE_OPENSSL
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#endif

namespace gyre {
namespace {

constexpr char kConfirmText[16] = {'g', 'y', 'r', 'e', ' ', 'k', 'e', 'y', ' ', 'c', 'o', 'n', 'f', 'i', 'r', 'm'};
constexpr char kCallerLabel[] = "gyre caller->listener v1";
constexpr char kListenerLabel[] = "gyre listener->caller v1";

bool haveUserKey() {
  std::vector<unsigned char> key;
  bool have = false;
  if (userKey(&key, &have) != ncclSuccess) return false;
  if (!key.empty()) wipe(key.data(), key.size());
  return have;
}

std::string keySourceName(uint32_t s) {
  return s ? "a user key (gyreSetEncryptionKey or GYRE_ENCRYPT_KEY_FILE)" : "no user key";
}

void appendBytes(std::vector<unsigned char>* v, const void* p, size_t n) {
  v->insert(v->end(), static_cast<const unsigned char*>(p), static_cast<const unsigned char*>(p) + n);
}

// HKDF-SHA256 of the shared secret (with the user's key) into one direction's key.
bool deriveDirection(const LinkSecret& link, const std::vector<unsigned char>& salt,
                     const std::vector<unsigned char>& info, DirectionKey* out) {
#if GYRE_HAVE_OPENSSL
  std::vector<unsigned char> ikm;
  bool have = false;
  if (userKey(&ikm, &have) != ncclSuccess) return false;
  for (int i = 0; i < 8; ++i) ikm.push_back(static_cast<unsigned char>(link.secret >> (8 * i)));
  ikm.push_back(static_cast<unsigned char>(link.purpose));
  unsigned char bytes[sizeof(out->key) + sizeof(out->iv)];
  bool ok = false;
  if (EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr)) {
    EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
    EVP_KDF_free(kdf);
    if (ctx) {
      char digest[] = "SHA256";
      OSSL_PARAM params[] = {
          OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
          OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, ikm.data(), ikm.size()),
          OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<unsigned char*>(salt.data()),
                                            salt.size()),
          OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<unsigned char*>(info.data()),
                                            info.size()),
          OSSL_PARAM_construct_end()};
      ok = EVP_KDF_derive(ctx, bytes, sizeof(bytes), params) == 1;
      EVP_KDF_CTX_free(ctx);
    }
  }
  wipe(ikm.data(), ikm.size());
  memcpy(out->key, bytes, sizeof(out->key));
  memcpy(out->iv, bytes + sizeof(out->key), sizeof(out->iv));
  wipe(bytes, sizeof(bytes));
  return ok;
#else
  (void)link;
  (void)salt;
  (void)info;
  (void)out;
  return false;
#endif
}

bool callerKey(const LinkSecret& link, const std::string& listenerId, const SecureHello& caller, DirectionKey* k) {
  std::vector<unsigned char> salt(caller.random, caller.random + sizeof(caller.random));
  std::vector<unsigned char> info;
  appendBytes(&info, kCallerLabel, sizeof(kCallerLabel));
  appendBytes(&info, &caller, sizeof(caller));
  appendBytes(&info, listenerId.data(), listenerId.size());
  return deriveDirection(link, salt, info, k);
}

bool listenerKey(const LinkSecret& link, const SecureHello& caller, const SecureHello& listener, DirectionKey* k) {
  std::vector<unsigned char> salt(caller.random, caller.random + sizeof(caller.random));
  appendBytes(&salt, listener.random, sizeof(listener.random));
  std::vector<unsigned char> info;
  appendBytes(&info, kListenerLabel, sizeof(kListenerLabel));
  appendBytes(&info, &caller, sizeof(caller));
  appendBytes(&info, &listener, sizeof(listener));
  return deriveDirection(link, salt, info, k);
}

SecureHello helloWith(const char (&magic)[8], uint32_t status) {
  SecureHello h{};
  memcpy(h.magic, magic, sizeof(h.magic));
  h.version = kSecureVersion;
  h.keySource = haveUserKey() ? 1 : 0;
  h.status = status;
  return h;
}

// Why the listener refused, for the caller's error.
std::string refusalText(const SecureHello& answer, const SecureHello& mine) {
  switch (answer.status) {
    case kSecureBadKey:
      return "authentication failed: the peer could not authenticate this rank's records, so the two hold "
             "different keys (another unique id, or another user key)";
    case kSecureKeySource:
      return "authentication failed: this rank has " + keySourceName(mine.keySource) + ", the peer has " +
             keySourceName(answer.keySource) + "; every rank must use the same key";
    case kSecureReplayed:
      return "the peer refused this connection as a replay of an earlier one";
    default:
      return "the peer refused this rank's encrypted hello as malformed (a gyre of another version?)";
  }
}

}  // namespace

bool secureRandom(unsigned char* random, size_t bytes) {
#if GYRE_HAVE_OPENSSL
  return RAND_bytes(random, static_cast<int>(bytes)) == 1;
#else
  (void)random;
  (void)bytes;
  return false;
#endif
}

std::string listenerIdOf(const LinkSecret& link, const NetAddress& listener) {
  return link.purpose == LinkPurpose::Session ? listener.toString() : std::string();
}

ncclResult_t secureConnect(Socket& s, const LinkSecret& link, const NetAddress& listener, const Deadline& deadline,
                           const std::atomic<bool>* abort, const std::string& peerName) {
  const std::string what = "encryption handshake with " + peerName;
  SecureHello mine = helloWith(kSecureCallerMagic, kSecureAccepted);
  std::unique_ptr<RecordChannel> channel = RecordChannel::create();
  DirectionKey up;
  const bool ok = channel && secureRandom(mine.random, sizeof(mine.random)) &&
                  callerKey(link, listenerIdOf(link, listener), mine, &up) && channel->setSendKey(up);
  wipe(&up, sizeof(up));
  if (!ok) return fail(ncclSystemError, "%s: OpenSSL could not make this connection's key", what.c_str());
  channel->expectPreamble(sizeof(SecureHello), [link, mine, ch = channel.get()](const unsigned char* p,
                                                                                 std::string* why) {
    SecureHello answer;
    memcpy(&answer, p, sizeof(answer));
    if (memcmp(answer.magic, kSecureListenerMagic, sizeof(answer.magic)) != 0 || answer.version != kSecureVersion) {
      *why = "the peer answered this rank's encrypted hello with something else (another program, or a gyre of "
             "another version)";
      return false;
    }
    if (answer.status != kSecureAccepted) {
      *why = refusalText(answer, mine);
      return false;
    }
    DirectionKey down;
    const bool keyed = listenerKey(link, mine, answer, &down) && ch->setRecvKey(down);
    wipe(&down, sizeof(down));
    if (!keyed) *why = "OpenSSL could not derive the peer's key";
    return keyed;
  });
  channel->expectConfirmation(kConfirmText, sizeof(kConfirmText));
  GYRE_CHECK(s.sendAll(&mine, sizeof(mine), deadline, abort, what.c_str()));
  s.attachChannel(std::move(channel));
  return ncclSuccess;
}

std::unique_ptr<RecordChannel> secureListen(const LinkSecret& link, const std::string& listenerId,
                                            const SecureHello& caller, std::string* why, uint32_t* status) {
  *status = kSecureMalformed;
  if (memcmp(caller.magic, kSecureCallerMagic, sizeof(caller.magic)) != 0 || caller.version != kSecureVersion) {
    *why = "its encrypted hello is malformed (another program, or a gyre of another version)";
    return nullptr;
  }
  const uint32_t mine = haveUserKey() ? 1 : 0;
  if (caller.keySource != mine) {
    *status = kSecureKeySource;
    *why = "authentication failed: the caller has " + keySourceName(caller.keySource) + ", this rank has " +
           keySourceName(mine);
    return nullptr;
  }
  std::unique_ptr<RecordChannel> channel = RecordChannel::create();
  DirectionKey up;
  const bool ok = channel && callerKey(link, listenerId, caller, &up) && channel->setRecvKey(up);
  wipe(&up, sizeof(up));
  if (!ok) {
    *why = "OpenSSL could not derive the caller's key";
    return nullptr;
  }
  return channel;
}

bool secureAccept(Socket& s, const LinkSecret& link, const SecureHello& caller,
                  std::unique_ptr<RecordChannel> channel, std::string* why) {
  SecureHello answer = helloWith(kSecureListenerMagic, kSecureAccepted);
  DirectionKey down;
  const bool ok = secureRandom(answer.random, sizeof(answer.random)) && listenerKey(link, caller, answer, &down) &&
                  channel->setSendKey(down);
  wipe(&down, sizeof(down));
  const auto* first = reinterpret_cast<const unsigned char*>(&answer);
  std::vector<unsigned char> bytes(first, first + sizeof(answer));
  if (!ok || !channel->seal(kConfirmText, sizeof(kConfirmText), &bytes)) {
    *why = "OpenSSL could not key this side of the connection";
    return false;
  }
  // Clear bytes on a fresh connection: they fit its send buffer at once.
  TentativeFailures attempt;
  if (s.sendAll(bytes.data(), bytes.size(), Deadline::afterSeconds(2), nullptr, "encryption handshake") !=
      ncclSuccess) {
    *why = "it closed the connection during the encryption handshake";
    return false;
  }
  s.attachChannel(std::move(channel));
  return true;
}

void secureRefuse(Socket& s, uint32_t status) {
  const SecureHello answer = helloWith(kSecureListenerMagic, status);
  size_t done = 0;
  TentativeFailures attempt;  // best effort: the caller may be gone
  (void)s.trySend(&answer, sizeof(answer), &done, "encryption handshake");
}

}  // namespace gyre
