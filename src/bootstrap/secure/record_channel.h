// The record layer of an encrypted connection: each direction is a stream of
// AES-256-GCM records,
//
//   [u32 plaintext bytes, little-endian][ciphertext][16-byte tag]
//
// with its own key and a 96-bit nonce made from its own record counter (the
// direction's base IV xor the count, as TLS 1.3 does). The length is
// authenticated too. So a record altered, dropped, replayed, reordered or
// sealed with another key fails its tag, and a stream cut inside a record is
// seen as cut: none is ever handed up as data.
//
// sendv/recvv behave like non-blocking sendmsg/recvmsg on the socket, so the
// transports keep their loops. sendv seals what it is given (up to one
// record) and counts it as sent only once the whole record has left; until
// then it says EAGAIN and must be called again with the same bytes. recvv
// may hold plaintext or a whole record the kernel no longer shows as
// readable: a caller that polls must first ask hasBufferedInput().
// A failed record poisons the channel: every later call fails the same way.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gyre {

// One direction's key and base IV.
struct DirectionKey {
  unsigned char key[32];
  unsigned char iv[12];
};

constexpr size_t kRecordHeaderBytes = 4;
constexpr size_t kRecordTagBytes = 16;
// Large enough that the per-record costs (a nonce, a tag, a system call)
// are small next to the AES work; small enough that a record stays in L2
// while it is sealed and that the receiver starts decrypting a step's first
// record while the rest is still on the wire (a record is opened only whole).
constexpr size_t kMaxRecordPlaintext = 64 << 10;

class RecordChannel {
 public:
  // A channel with no keys yet; null without libcrypto.
  static std::unique_ptr<RecordChannel> create();
  bool setSendKey(const DirectionKey& k);
  bool setRecvKey(const DirectionKey& k);
  // Before the first record the peer sends `bytes` clear bytes (its
  // handshake answer): recvv reads them first and hands them to `take`,
  // which sets the receive key or says why not (the read then fails with
  // EBADMSG and that text).
  void expectPreamble(size_t bytes, std::function<bool(const unsigned char*, std::string*)> take);
  // The peer's first record must hold exactly these bytes (a key
  // confirmation); it is checked and dropped, not handed up.
  void expectConfirmation(const void* data, size_t bytes);
  ~RecordChannel();
  RecordChannel(const RecordChannel&) = delete;
  RecordChannel& operator=(const RecordChannel&) = delete;

  // As sendmsg(fd, iov, MSG_DONTWAIT | MSG_NOSIGNAL): plaintext bytes taken,
  // or -1 with errno (EAGAIN: call again with the same bytes).
  ssize_t sendv(int fd, const iovec* iov, int iovcnt);
  // As recvmsg(fd, iov, MSG_DONTWAIT): plaintext bytes, 0 when the peer
  // closed between records, or -1 with errno: EBADMSG for a record that fails
  // authentication, EPROTO for a cut or malformed stream (problem() says which).
  ssize_t recvv(int fd, const iovec* iov, int iovcnt);

  // Plaintext, or a whole record, waiting here rather than in the kernel.
  bool hasBufferedInput() const;
  // A sealed record not yet wholly handed to the kernel.
  bool hasPendingOutput() const { return outPos_ < out_.size(); }
  // Why the last EBADMSG/EPROTO.
  const std::string& problem() const { return problem_; }

  // Record-level pieces, on memory instead of a socket (the handshake's
  // confirmation record, the fuzz target, tests).
  // Appends one record sealing [data, data+bytes) (bytes <= kMaxRecordPlaintext).
  bool seal(const void* data, size_t bytes, std::vector<unsigned char>* out);
  // Feeds received stream bytes; decrypted plaintext goes to *plain. False
  // (with problem()) on an unauthentic or malformed record.
  bool open(const void* data, size_t bytes, std::vector<unsigned char>* plain);

 private:
  RecordChannel() = default;
  struct Impl;
  bool sealInto(const iovec* iov, int iovcnt, size_t take);
  // Decrypts the record at in_[inPos_] (complete) into dst or plain_.
  bool openRecord(const iovec* iov, int iovcnt, size_t* delivered);
  size_t completeRecordBytes() const;  // 0 if no whole record is buffered
  // Hands a complete preamble to takePreamble_ (true if none is due, or it was taken).
  bool takePreambleIfHere();
  ssize_t failWith(int err, std::string why);
  // One record's worth (or what plain_ holds) into the iovecs: recvv's step.
  ssize_t recvRecords(int fd, const iovec* iov, int iovcnt);

  std::unique_ptr<Impl> impl_;
  size_t preambleBytes_ = 0;
  std::function<bool(const unsigned char*, std::string*)> takePreamble_;
  std::vector<unsigned char> confirmation_;
  uint64_t sendSeq_ = 0, recvSeq_ = 0;
  std::vector<unsigned char> out_;  // the sealed record being sent
  size_t outPos_ = 0;
  size_t outPlain_ = 0;             // its plaintext bytes (what sendv reports once it has left)
  std::vector<unsigned char> in_;   // received ciphertext
  size_t inPos_ = 0, inEnd_ = 0;
  std::vector<unsigned char> plain_;  // decrypted, not yet handed up
  size_t plainPos_ = 0, plainEnd_ = 0;
  int failed_ = 0;  // errno of the first failure
  std::string problem_;
};

}  // namespace gyre
