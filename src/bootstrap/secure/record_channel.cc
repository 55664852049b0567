#include "src/bootstrap/secure/record_channel.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gyre_crypto_config.h"  // GYRE_HAVE_OPENSSL, from meson.build
#include "src/bootstrap/secure/protection.h"

#if GYRE_HAVE_OPENSSL
#include <openssl/evp.h>
#endif

namespace gyre {
namespace {

constexpr size_t kMaxRecordBytes = kRecordHeaderBytes + kMaxRecordPlaintext + kRecordTagBytes;
// Room to read the next records' start along with this one's end.
constexpr size_t kReadAheadBytes = 16 << 10;
constexpr size_t kInBufferBytes = kMaxRecordBytes + kReadAheadBytes;
// Messages up to this size are sealed whole, whatever their pieces.
constexpr size_t kCoalesceBytes = 4096;

void nonceFor(const unsigned char iv[12], uint64_t seq, unsigned char out[12]) {
  memcpy(out, iv, 12);
  for (int i = 0; i < 8; ++i) out[11 - i] ^= static_cast<unsigned char>(seq >> (8 * i));
}

uint32_t readLength(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// Copies from [src, src+bytes) into the iovecs, skipping `skip` bytes of them.
size_t scatter(const unsigned char* src, size_t bytes, const iovec* iov, int iovcnt) {
  size_t done = 0;
  for (int i = 0; i < iovcnt && done < bytes; ++i) {
    const size_t n = std::min(iov[i].iov_len, bytes - done);
    memcpy(iov[i].iov_base, src + done, n);
    done += n;
  }
  return done;
}

size_t totalOf(const iovec* iov, int iovcnt) {
  size_t t = 0;
  for (int i = 0; i < iovcnt; ++i) t += iov[i].iov_len;
  return t;
}

// The non-empty rest of the iovecs after their first `skip` bytes.
void afterOffset(const iovec* iov, int iovcnt, size_t skip, std::vector<iovec>* out) {
  out->clear();
  for (int i = 0; i < iovcnt; ++i) {
    if (skip >= iov[i].iov_len) {
      skip -= iov[i].iov_len;
      continue;
    }
    out->push_back({static_cast<char*>(iov[i].iov_base) + skip, iov[i].iov_len - skip});
    skip = 0;
  }
}

}  // namespace

#if GYRE_HAVE_OPENSSL

struct RecordChannel::Impl {
  EVP_CIPHER_CTX* enc = nullptr;
  EVP_CIPHER_CTX* dec = nullptr;
  unsigned char sendIv[12];
  unsigned char recvIv[12];
  bool hasSend = false, hasRecv = false;
  ~Impl() {
    EVP_CIPHER_CTX_free(enc);  // frees and cleanses the key schedule
    EVP_CIPHER_CTX_free(dec);
    wipe(sendIv, sizeof(sendIv));
    wipe(recvIv, sizeof(recvIv));
  }
};

std::unique_ptr<RecordChannel> RecordChannel::create() {
  std::unique_ptr<RecordChannel> c(new RecordChannel());
  c->impl_ = std::make_unique<Impl>();
  Impl& m = *c->impl_;
  m.enc = EVP_CIPHER_CTX_new();
  m.dec = EVP_CIPHER_CTX_new();
  if (!m.enc || !m.dec) return nullptr;
  return c;
}

// The key schedule is set once; each record only sets its nonce.
bool RecordChannel::setSendKey(const DirectionKey& k) {
  memcpy(impl_->sendIv, k.iv, 12);
  return impl_->hasSend = EVP_EncryptInit_ex(impl_->enc, EVP_aes_256_gcm(), nullptr, k.key, nullptr) == 1;
}

bool RecordChannel::setRecvKey(const DirectionKey& k) {
  memcpy(impl_->recvIv, k.iv, 12);
  return impl_->hasRecv = EVP_DecryptInit_ex(impl_->dec, EVP_aes_256_gcm(), nullptr, k.key, nullptr) == 1;
}

bool RecordChannel::sealInto(const iovec* iov, int iovcnt, size_t take) {
  if (!impl_->hasSend) return false;
  const size_t start = out_.size();
  out_.resize(start + kRecordHeaderBytes + take + kRecordTagBytes);
  unsigned char* p = out_.data() + start;
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(take >> (8 * i));
  unsigned char nonce[12];
  nonceFor(impl_->sendIv, sendSeq_, nonce);
  EVP_CIPHER_CTX* ctx = impl_->enc;
  int len = 0;
  if (EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce) != 1 ||
      EVP_EncryptUpdate(ctx, nullptr, &len, p, static_cast<int>(kRecordHeaderBytes)) != 1)
    return false;
  unsigned char* at = p + kRecordHeaderBytes;
  size_t left = take;
  for (int i = 0; i < iovcnt && left > 0; ++i) {
    const size_t n = std::min(iov[i].iov_len, left);
    if (n == 0) continue;
    if (EVP_EncryptUpdate(ctx, at, &len, static_cast<const unsigned char*>(iov[i].iov_base), static_cast<int>(n)) != 1)
      return false;
    at += len;
    left -= n;
  }
  if (EVP_EncryptFinal_ex(ctx, at, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kRecordTagBytes, p + kRecordHeaderBytes + take) != 1)
    return false;
  ++sendSeq_;
  return true;
}

bool RecordChannel::openRecord(const iovec* iov, int iovcnt, size_t* delivered) {
  *delivered = 0;
  if (!impl_->hasRecv) return failWith(EPROTO, "a record arrived before the handshake set its key"), false;
  unsigned char* rec = in_.data() + inPos_;
  const size_t len = readLength(rec);
  unsigned char nonce[12];
  nonceFor(impl_->recvIv, recvSeq_, nonce);
  EVP_CIPHER_CTX* ctx = impl_->dec;
  int n = 0;
  if (EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce) != 1 ||
      EVP_DecryptUpdate(ctx, nullptr, &n, rec, static_cast<int>(kRecordHeaderBytes)) != 1)
    return failWith(EBADMSG, "authentication failed (the cipher would not start)"), false;
  const unsigned char* src = rec + kRecordHeaderBytes;
  // Straight into the caller's buffers when the whole record fits there.
  // As much as the caller's buffers take goes straight there (no copy of
  // its own); the rest waits in plain_. Nothing is handed up before the tag
  // below is checked.
  const size_t direct = confirmation_.empty() ? std::min(totalOf(iov, iovcnt), len) : 0;
  size_t left = direct;
  for (int i = 0; i < iovcnt && left > 0; ++i) {
    const size_t k = std::min(iov[i].iov_len, left);
    if (k == 0) continue;
    if (EVP_DecryptUpdate(ctx, static_cast<unsigned char*>(iov[i].iov_base), &n, src, static_cast<int>(k)) != 1)
      return failWith(EBADMSG, "authentication failed"), false;
    src += k;
    left -= k;
  }
  const size_t rest = len - direct;
  if (rest > 0) {
    plain_.resize(std::max(plain_.size(), rest));
    if (EVP_DecryptUpdate(ctx, plain_.data(), &n, src, static_cast<int>(rest)) != 1)
      return failWith(EBADMSG, "authentication failed"), false;
  }
  unsigned char tag[kRecordTagBytes];
  memcpy(tag, rec + kRecordHeaderBytes + len, kRecordTagBytes);
  unsigned char tail[16];
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kRecordTagBytes, tag) != 1 ||
      EVP_DecryptFinal_ex(ctx, tail, &n) != 1) {
    failWith(EBADMSG, "authentication failed: record " + std::to_string(recvSeq_) +
                          " was altered, replayed, reordered or sealed with another key");
    return false;
  }
  ++recvSeq_;
  inPos_ += kRecordHeaderBytes + len + kRecordTagBytes;
  if (inPos_ == inEnd_) inPos_ = inEnd_ = 0;
  if (!confirmation_.empty()) {
    const bool same = len == confirmation_.size() && memcmp(plain_.data(), confirmation_.data(), len) == 0;
    confirmation_.clear();
    if (!same) return failWith(EBADMSG, "authentication failed: the peer's key confirmation is wrong"), false;
    return true;
  }
  *delivered = direct;
  plainPos_ = 0;
  plainEnd_ = rest;
  return true;
}

RecordChannel::~RecordChannel() {
  if (!plain_.empty()) wipe(plain_.data(), plain_.size());
  if (!out_.empty()) wipe(out_.data(), out_.size());
}

#else  // !GYRE_HAVE_OPENSSL: no channel is ever made (chooseProtection refuses first).

struct RecordChannel::Impl {};
std::unique_ptr<RecordChannel> RecordChannel::create() { return nullptr; }
bool RecordChannel::setSendKey(const DirectionKey&) { return false; }
bool RecordChannel::setRecvKey(const DirectionKey&) { return false; }
bool RecordChannel::sealInto(const iovec*, int, size_t) { return false; }
bool RecordChannel::openRecord(const iovec*, int, size_t*) { return false; }
RecordChannel::~RecordChannel() = default;

#endif

ssize_t RecordChannel::failWith(int err, std::string why) {
  if (!failed_) {
    failed_ = err;
    problem_ = std::move(why);
  }
  errno = failed_;
  return -1;
}

size_t RecordChannel::completeRecordBytes() const {
  const size_t avail = inEnd_ - inPos_;
  if (avail < kRecordHeaderBytes) return 0;
  const size_t len = readLength(in_.data() + inPos_);
  if (len > kMaxRecordPlaintext) return 0;
  const size_t total = kRecordHeaderBytes + len + kRecordTagBytes;
  return avail >= total ? total : 0;
}

bool RecordChannel::hasBufferedInput() const {
  if (preambleBytes_ > 0) return inEnd_ - inPos_ >= preambleBytes_;
  return plainPos_ < plainEnd_ || completeRecordBytes() > 0;
}

void RecordChannel::expectPreamble(size_t bytes, std::function<bool(const unsigned char*, std::string*)> take) {
  preambleBytes_ = bytes;
  takePreamble_ = std::move(take);
}

void RecordChannel::expectConfirmation(const void* data, size_t bytes) {
  confirmation_.assign(static_cast<const unsigned char*>(data), static_cast<const unsigned char*>(data) + bytes);
}

bool RecordChannel::takePreambleIfHere() {
  if (preambleBytes_ == 0 || inEnd_ - inPos_ < preambleBytes_) return true;
  std::string why;
  const bool ok = takePreamble_(in_.data() + inPos_, &why);
  inPos_ += preambleBytes_;
  preambleBytes_ = 0;
  takePreamble_ = nullptr;  // drops what it held (key material)
  if (!ok) failWith(EBADMSG, why);
  return ok;
}

ssize_t RecordChannel::sendv(int fd, const iovec* iov, int iovcnt) {
  if (failed_) return failWith(failed_, problem_);
  // Records go out one after another until the socket would block, as a
  // sendmsg() would: a short return tells the caller the socket is full.
  const size_t total = totalOf(iov, iovcnt);
  size_t done = 0;
  std::vector<iovec> rest;
  for (;;) {
    while (outPos_ < out_.size()) {
      const ssize_t n = ::send(fd, out_.data() + outPos_, out_.size() - outPos_, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        // The caller comes back with the bytes from `done` on (this record's first).
        if (done > 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return static_cast<ssize_t>(done);
        return -1;
      }
      outPos_ += static_cast<size_t>(n);
    }
    done += outPlain_;
    out_.clear();
    outPos_ = outPlain_ = 0;
    if (done >= total) return static_cast<ssize_t>(done);
    afterOffset(iov, iovcnt, done, &rest);
    // Small messages go whole in one record (one system call each side); a
    // large one is cut at its pieces' edges, so a small header and a large
    // payload become records that the receiver's reads of each match and
    // that decrypt straight into place.
    const size_t left = total - done;
    const size_t take = std::min(left <= kCoalesceBytes ? left : rest[0].iov_len, kMaxRecordPlaintext);
    if (!sealInto(rest.data(), static_cast<int>(rest.size()), take))
      return failWith(EPROTO, "the cipher failed to seal a record");
    outPlain_ = take;
  }
}

ssize_t RecordChannel::recvv(int fd, const iovec* iov, int iovcnt) {
  // Record after record until the buffers are full or the socket has
  // nothing more, as a recvmsg() would: a short return means "no more now".
  const size_t total = totalOf(iov, iovcnt);
  size_t got = 0;
  std::vector<iovec> rest;
  while (got < total) {
    afterOffset(iov, iovcnt, got, &rest);
    const ssize_t n = recvRecords(fd, rest.data(), static_cast<int>(rest.size()));
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    // A failure or the end of the stream shows on the next call.
    if (got > 0) return static_cast<ssize_t>(got);
    return n;
  }
  return static_cast<ssize_t>(got);
}

ssize_t RecordChannel::recvRecords(int fd, const iovec* iov, int iovcnt) {
  if (failed_) return failWith(failed_, problem_);
  if (totalOf(iov, iovcnt) == 0) return 0;
  for (;;) {
    if (plainPos_ < plainEnd_) {
      const size_t n = scatter(plain_.data() + plainPos_, plainEnd_ - plainPos_, iov, iovcnt);
      plainPos_ += n;
      if (plainPos_ == plainEnd_) plainPos_ = plainEnd_ = 0;
      return static_cast<ssize_t>(n);
    }
    if (!takePreambleIfHere()) return -1;
    const size_t avail = inEnd_ - inPos_;
    if (preambleBytes_ == 0 && avail >= kRecordHeaderBytes && readLength(in_.data() + inPos_) > kMaxRecordPlaintext)
      return failWith(EPROTO, "a record announces " + std::to_string(readLength(in_.data() + inPos_)) +
                                  " bytes, more than any gyre record: the stream is not encrypted by gyre, or was altered");
    if (preambleBytes_ == 0 && completeRecordBytes() > 0) {
      size_t delivered = 0;
      if (!openRecord(iov, iovcnt, &delivered)) return -1;
      if (delivered > 0) return static_cast<ssize_t>(delivered);
      continue;  // into plain_ (or an empty record)
    }
    if (in_.empty()) in_.resize(kInBufferBytes);
    // Read to the end of the record under way (so a large record lands whole,
    // and is not moved), or a small read ahead while its length is unknown or
    // it is small (several small records per system call).
    size_t need = kReadAheadBytes;
    if (preambleBytes_ == 0 && avail >= kRecordHeaderBytes) {
      const size_t whole = kRecordHeaderBytes + readLength(in_.data() + inPos_) + kRecordTagBytes;
      need = std::max(whole - avail, whole <= kReadAheadBytes ? kReadAheadBytes - avail : size_t{0});
    }
    if (inPos_ > 0 && in_.size() - inEnd_ < need) {  // room for it: move the little that is left
      memmove(in_.data(), in_.data() + inPos_, avail);
      inPos_ = 0;
      inEnd_ = avail;
    }
    const ssize_t n = ::recv(fd, in_.data() + inEnd_, std::min(need, in_.size() - inEnd_), MSG_DONTWAIT);
    if (n == 0) {
      if (preambleBytes_ > 0)
        return failWith(EPROTO, "the peer closed the connection without answering this rank's encrypted hello: it "
                        "refused it (it runs with GYRE_ENCRYPT=off or without OpenSSL; its log says why) or died");
      if (avail == 0) return 0;
      return failWith(EPROTO, "the peer closed the connection inside an encrypted record (the stream was cut)");
    }
    if (n < 0) return -1;
    inEnd_ += static_cast<size_t>(n);
  }
}

bool RecordChannel::seal(const void* data, size_t bytes, std::vector<unsigned char>* out) {
  if (bytes > kMaxRecordPlaintext || failed_) return false;
  iovec v{const_cast<void*>(data), bytes};
  std::vector<unsigned char> keep;
  keep.swap(out_);
  const bool ok = sealInto(&v, 1, bytes);
  out->insert(out->end(), out_.begin(), out_.end());
  out_.swap(keep);
  return ok;
}

bool RecordChannel::open(const void* data, size_t bytes, std::vector<unsigned char>* plain) {
  if (failed_) return false;
  if (in_.empty()) in_.resize(kInBufferBytes);
  const auto* src = static_cast<const unsigned char*>(data);
  while (bytes > 0) {
    if (inPos_ > 0) {
      memmove(in_.data(), in_.data() + inPos_, inEnd_ - inPos_);
      inEnd_ -= inPos_;
      inPos_ = 0;
    }
    const size_t n = std::min(bytes, in_.size() - inEnd_);
    memcpy(in_.data() + inEnd_, src, n);
    inEnd_ += n;
    src += n;
    bytes -= n;
    for (;;) {
      if (!takePreambleIfHere()) return false;
      if (preambleBytes_ > 0) break;
      const size_t avail = inEnd_ - inPos_;
      if (avail >= kRecordHeaderBytes && readLength(in_.data() + inPos_) > kMaxRecordPlaintext) {
        failWith(EPROTO, "a record announces more bytes than any gyre record");
        return false;
      }
      if (completeRecordBytes() == 0) break;
      size_t delivered = 0;
      if (!openRecord(nullptr, 0, &delivered)) return false;
      plain->insert(plain->end(), plain_.begin() + static_cast<std::ptrdiff_t>(plainPos_),
                    plain_.begin() + static_cast<std::ptrdiff_t>(plainEnd_));
      plainPos_ = plainEnd_ = 0;
    }
  }
  return true;
}

}  // namespace gyre
