#include "src/bootstrap/secure/protection.h"

#include <strings.h>
#include <sys/socket.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>

#include "gyre_crypto_config.h"  // GYRE_HAVE_OPENSSL, from meson.build
#include "src/bootstrap/net_address.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

#if GYRE_HAVE_OPENSSL
#include <openssl/crypto.h>
#endif

namespace gyre {
namespace {

constexpr size_t kMinKeyBytes = 16;
constexpr size_t kMaxKeyBytes = 4096;

struct KeyStore {
  std::mutex mutex;
  std::vector<unsigned char> key;
  bool set = false;       // by the program (wins over the file)
  bool fileRead = false;  // GYRE_ENCRYPT_KEY_FILE looked at
};
KeyStore& store() {
  static KeyStore* s = new KeyStore;  // never destroyed: connections may outlive static destructors
  return *s;
}

void clearKey(KeyStore& s) {
  if (!s.key.empty()) wipe(s.key.data(), s.key.size());
  s.key.clear();
}

ncclResult_t readKeyFile(KeyStore& s) {
  s.fileRead = true;
  const std::string path = env::getString("GYRE_ENCRYPT_KEY_FILE");
  if (path.empty()) return ncclSuccess;
  if (!cryptoBuilt())
    return fail(ncclInvalidUsage, "GYRE_ENCRYPT_KEY_FILE=%s asks for encryption, but this gyre was built without "
                "OpenSSL 3 (libcrypto; install libssl-dev and rebuild)", path.c_str());
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ncclInvalidArgument, "GYRE_ENCRYPT_KEY_FILE=%s: cannot open it", path.c_str());
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < kMinKeyBytes || bytes.size() > kMaxKeyBytes) {
    const size_t n = bytes.size();
    if (!bytes.empty()) wipe(bytes.data(), bytes.size());
    return fail(ncclInvalidArgument, "GYRE_ENCRYPT_KEY_FILE=%s holds %zu bytes; a key is %zu..%zu bytes",
                path.c_str(), n, kMinKeyBytes, kMaxKeyBytes);
  }
  s.key = std::move(bytes);
  return ncclSuccess;
}

bool loopback(const NetAddress& a) {
  const sockaddr* sa = a.sa();
  if (sa->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;
}

bool sameIp(const NetAddress& a, const NetAddress& b) {
  NetAddress x = a, y = b;
  x.setPort(0);
  y.setPort(0);
  return x.toString() == y.toString();
}

}  // namespace

void wipe(void* p, size_t bytes) {
#if GYRE_HAVE_OPENSSL
  OPENSSL_cleanse(p, bytes);
#else
  volatile unsigned char* v = static_cast<volatile unsigned char*>(p);
  while (bytes--) *v++ = 0;
#endif
}

bool cryptoBuilt() { return GYRE_HAVE_OPENSSL != 0; }

EncryptMode encryptMode() {
  const std::string v = env::getString("GYRE_ENCRYPT");
  if (strcasecmp(v.c_str(), "on") == 0) return EncryptMode::On;
  if (strcasecmp(v.c_str(), "off") == 0) return EncryptMode::Off;
  return EncryptMode::Auto;
}

const char* encryptModeName(EncryptMode m) {
  return m == EncryptMode::On ? "on" : m == EncryptMode::Off ? "off" : "auto";
}

ncclResult_t setUserKey(const void* key, size_t bytes) {
  if (key == nullptr && bytes == 0) {
    KeyStore& s = store();
    std::lock_guard<std::mutex> lock(s.mutex);
    clearKey(s);
    s.set = false;
    return ncclSuccess;
  }
  if (!cryptoBuilt())
    return fail(ncclInvalidUsage, "gyreSetEncryptionKey: this gyre was built without OpenSSL 3 (libcrypto; install "
                "libssl-dev and rebuild), so it cannot encrypt");
  if (key == nullptr) return fail(ncclInvalidArgument, "gyreSetEncryptionKey: key is NULL with bytes = %zu", bytes);
  if (bytes < kMinKeyBytes || bytes > kMaxKeyBytes)
    return fail(ncclInvalidArgument, "gyreSetEncryptionKey: a key of %zu bytes; it must be %zu..%zu bytes", bytes,
                kMinKeyBytes, kMaxKeyBytes);
  KeyStore& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  clearKey(s);
  s.key.assign(static_cast<const unsigned char*>(key), static_cast<const unsigned char*>(key) + bytes);
  s.set = true;
  return ncclSuccess;
}

ncclResult_t userKey(std::vector<unsigned char>* out, bool* have) {
  KeyStore& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.set && !s.fileRead) GYRE_CHECK(readKeyFile(s));
  *have = !s.key.empty();
  *out = s.key;
  return ncclSuccess;
}

void wipeUserKey() {
  KeyStore& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  clearKey(s);
  s.set = false;
  s.fileRead = false;
}

bool sameHostConnection(int fd) {
  sockaddr_storage mine{}, theirs{};
  socklen_t a = sizeof(mine), b = sizeof(theirs);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &a) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &b) != 0)
    return false;  // unknown: treat as between hosts (the safe side)
  const NetAddress local(reinterpret_cast<sockaddr*>(&mine)), peer(reinterpret_cast<sockaddr*>(&theirs));
  return loopback(peer) || sameIp(local, peer);
}

ncclResult_t chooseProtection(int fd, const LinkSecret& link, bool* encrypt, const char* what) {
  *encrypt = false;
  const EncryptMode mode = encryptMode();
  if (mode == EncryptMode::Off) return ncclSuccess;
  if (mode == EncryptMode::Auto && fd >= 0 && sameHostConnection(fd)) return ncclSuccess;
  std::vector<unsigned char> key;
  bool haveKey = false;
  GYRE_CHECK(userKey(&key, &haveKey));
  if (!key.empty()) wipe(key.data(), key.size());
  if (!cryptoBuilt()) {
    if (mode == EncryptMode::On)
      return fail(ncclInvalidUsage, "%s: GYRE_ENCRYPT=on, but this gyre was built without OpenSSL 3 (libcrypto; "
                  "install libssl-dev and rebuild)", what);
    static std::once_flag said;
    std::call_once(said, [] {
      GYRE_INFO("INIT", "GYRE_ENCRYPT=auto: connections between hosts are not encrypted: this gyre was built "
                "without OpenSSL 3 (libcrypto)");
    });
    return ncclSuccess;
  }
  if (!link.random && !haveKey) {
    if (mode == EncryptMode::On)
      return fail(ncclInvalidUsage, "%s: GYRE_ENCRYPT=on, but there is no key: with NCCL_COMM_ID the unique id "
                  "carries no random secret; set one with gyreSetEncryptionKey or GYRE_ENCRYPT_KEY_FILE", what);
    static std::once_flag warned;
    std::call_once(warned, [] {
      GYRE_WARN("GYRE_ENCRYPT=auto: connections between hosts stay in the clear: with NCCL_COMM_ID the unique id "
                "carries no random secret to key them with; set a key (gyreSetEncryptionKey or "
                "GYRE_ENCRYPT_KEY_FILE, the same on every rank) to encrypt them");
    });
    return ncclSuccess;
  }
  *encrypt = true;
  static std::once_flag said;
  std::call_once(said, [mode, haveKey] {
    GYRE_INFO("INIT", "GYRE_ENCRYPT=%s: %s are encrypted and authenticated (AES-256-GCM records, keys from %s)",
              encryptModeName(mode), mode == EncryptMode::On ? "all socket connections" : "socket connections between hosts",
              haveKey ? "the user key and the unique id" : "the unique id's random secret");
  });
  return ncclSuccess;
}

ncclResult_t checkProtectionPossible(const LinkSecret& link, const char* what) {
  const EncryptMode mode = encryptMode();
  if (mode == EncryptMode::Off) return ncclSuccess;
  std::vector<unsigned char> key;
  bool have = false;
  GYRE_CHECK(userKey(&key, &have));  // an unreadable key file fails here
  if (!key.empty()) wipe(key.data(), key.size());
  if (mode != EncryptMode::On) return ncclSuccess;  // auto decides (and says) per connection
  bool encrypt = false;
  return chooseProtection(-1, link, &encrypt, what);
}

}  // namespace gyre
