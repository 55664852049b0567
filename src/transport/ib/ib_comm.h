// The objects of one IB network connection: RC queue pairs (striped), their
// completion queue, and the FIFO through which the receiver tells the sender
// where each posted buffer is.
//
// Protocol. irecv() RDMA-writes a FifoEntry {addr, rkey, size, seq} into the
// sender's FIFO slot idx % kIbSlots; isend() of request idx waits (returns no
// request) until that slot's seq says idx + 1, so a sender never writes
// into a buffer the receiver has not posted. The payload is cut into one
// piece per QP, each an RDMA WRITE_WITH_IMM (immediate = the message's byte
// count); every QP carries one piece of every message in order, so the k-th
// receive completion on a QP belongs to request k, and a request is done
// when all its QPs' completions have arrived.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "src/bootstrap/socket.h"
#include "src/transport/ib/ib_devices.h"

namespace gyre::ib {

constexpr int kIbSlots = 32;     // receives a comm may have posted at once
constexpr int kIbMaxQps = 16;    // NCCL_IB_QPS_PER_CONNECTION is clamped to this
constexpr uint64_t kFifoWrId = ~uint64_t{0};

struct FifoEntry {
  uint64_t addr;
  uint32_t rkey;
  uint32_t size;
  uint64_t seq;  // request index + 1; written last
};

// What each side sends the other over the set-up socket.
struct QpInfo {
  uint32_t magic;
  uint32_t nqps;
  uint32_t qpn[kIbMaxQps];
  uint16_t lid;
  uint8_t linkLayer;
  uint8_t mtu;
  ibv_gid gid;
  uint64_t fifoAddr;  // sender only
  uint32_t fifoRkey;
};

struct IbComm;

struct IbRequest {
  IbComm* comm = nullptr;
  bool used = false;
  int pending = 0;  // completions still awaited
  int size = 0;
};

struct IbMr {
  ibv_mr* mr = nullptr;
  bool dmabuf = false;  // registered by ibv_reg_dmabuf_mr, outside the cache
};

struct IbComm {
  bool isSend = false;
  const IbPort* port = nullptr;
  std::string what;  // "fake_ib0:1 <-> 127.0.0.1:4444"
  Socket sock;
  int stage = 0;
  QpInfo mine{}, theirs{};
  size_t theirsBytes = 0;
  ibv_cq* cq = nullptr;
  std::vector<ibv_qp*> qps;
  // Sender: the FIFO the receiver writes into. Receiver: the entries it writes from.
  alignas(64) FifoEntry fifo[kIbSlots]{};
  ibv_mr* fifoMr = nullptr;
  uint64_t index = 0;  // the next request's index
  IbRequest reqs[kIbSlots];
  std::vector<uint64_t> qpDone;  // receiver: completions per QP so far
  std::string error;             // the first completion error, reported on every test()
  // Set by the device's event thread (ib_async.h): asyncError is written
  // once, before asyncFailed is set.
  std::atomic<bool> asyncFailed{false};
  std::string asyncError;
};

}  // namespace gyre::ib
