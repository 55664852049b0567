// Host shared memory through which ranks of different processes on one host
// tell each other about their calls, without the bootstrap's sockets:
//   - notes: for the k-th send from rank s to rank r, where the buffer lives
//     (its allocation, shared by CUDA IPC) and how many bytes it has, or that
//     it cannot be shared and the pair stages this call
//     (src/device/copy/ipc_copies.h). Each ordered pair has a ring of notes;
//     a sender waits only when the receiver is a whole ring behind;
//   - records: an all-gather of a small record per rank and call, for the
//     direct collectives of processes sharing a GPU (direct_calls.h), when
//     every rank of the communicator is on this host. Each rank has a ring of
//     records; it reuses a slot once every peer collected it;
//   - inboxes: `inboxWords` 32-bit words per rank, page-aligned, which the
//     IPC copies register for the device (ipc_copies.h): peers' streams
//     write their flags there, the owner's streams wait on them, and the
//     owner's host releases those waits with plain stores.
//
// The segment is a memfd of the lowest local rank, mapped by the others
// through /proc/<pid>/fd/<fd> at set-up: it has no name in /dev/shm, so a
// killed process leaves nothing behind.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <vector>

#include "include/gyre.h"
#include "src/debug/deadline.h"
#include "src/device/runtime/ipc_registry.h"

namespace gyre {

class Bootstrap;

struct SendNote {
  uint64_t bytes = 0;
  uint32_t usable = 0;  // 0: the sender stages this call, and so must the receiver
  uint32_t capturedSlot = 0;  // 0: not captured; else the pair's capture slot + 1 (ipc_copies.h)
  SharedAllocation allocation;
  uint64_t offset = 0;  // in `allocation`, or in the window
  // The sender's registered window holding the buffer, as its serial + 1
  // (src/device/peer_windows.h): the receiver has it mapped since
  // registration, so `allocation` is left empty. 0: none.
  uint64_t window = 0;
};

class ProcessMailbox {
 public:
  ProcessMailbox() = default;
  ~ProcessMailbox();
  ProcessMailbox(const ProcessMailbox&) = delete;
  ProcessMailbox& operator=(const ProcessMailbox&) = delete;

  // Every rank of the communicator calls it. `local` marks the ranks on this
  // host that use the mailbox (all ranks agree on it); the others take part
  // in the exchanges only.
  ncclResult_t setup(Bootstrap* bootstrap, const std::vector<bool>& local, size_t inboxWords,
                     const Deadline& deadline, const std::atomic<bool>* abort);
  bool ready() const { return base_ != nullptr; }

  // The inboxes of every local rank, one after another (null without a
  // mailbox), and `rank`'s in them.
  uint32_t* inboxes(size_t* bytes) const;
  uint32_t* inboxOf(int rank) const;
  // Hands the mapping to the caller, who unmaps it (munmap(*base, *bytes))
  // once nothing uses it; the mailbox is unusable from then on.
  void detach(void** base, size_t* bytes);

  // Posts the `seq`-th note from `from` to `to`; waits (until `deadline`)
  // only while the ring's slot still holds an untaken note.
  bool post(int from, int to, uint64_t seq, const SendNote& note, const Deadline& deadline,
            const std::atomic<bool>* abort);
  // Takes the `seq`-th note from `from` to `to`, waiting until `deadline`,
  // `abort`, or `peerGone()` returning true.
  template <typename Gone>
  bool take(int from, int to, uint64_t seq, SendNote* note, const Deadline& deadline, const std::atomic<bool>* abort,
            Gone peerGone);

  // Records of up to kRecordBytes; usable when every rank is on this host.
  static constexpr size_t kRecordBytes = 512;
  bool recordsUsable() const { return base_ && nlocal_ == int(localIndex_.size()); }
  // Every rank's `bytes`-long record of meeting `seq` into out[rank * bytes]
  // (this rank's, at its place, is posted first). False on `deadline`,
  // `abort`, or `gone(rank)` for a rank missing; *missing names it.
  template <typename Gone>
  bool allGather(int rank, uint64_t seq, void* out, size_t bytes, const Deadline& deadline,
                 const std::atomic<bool>* abort, Gone gone, int* missing);

 private:
  struct Record {
    std::atomic<uint64_t> posted;     // seq + 1 of the record it holds
    std::atomic<uint32_t> collected;  // peers that copied it
    uint32_t pad;
    char data[kRecordBytes];
  };
  Record* record(int rank, uint64_t seq);
  bool postRecord(int rank, uint64_t seq, const void* data, size_t bytes);
  struct Slot {
    std::atomic<uint64_t> posted;  // seq + 1 of the note it holds
    std::atomic<uint64_t> taken;   // seq + 1 of the note last taken from it
    SendNote note;
  };
  static constexpr uint64_t kDepth = 16;
  Slot* slot(int from, int to, uint64_t seq);
  bool takeOnce(Slot* s, uint64_t seq, SendNote* note);

  std::vector<int> localIndex_;  // by rank, -1 where not in the mailbox
  int nlocal_ = 0;
  size_t inboxWords_ = 0, inboxOffset_ = 0;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

template <typename Gone>
bool ProcessMailbox::take(int from, int to, uint64_t seq, SendNote* note, const Deadline& deadline,
                          const std::atomic<bool>* abort, Gone peerGone) {
  Slot* s = slot(from, to, seq);
  for (unsigned spins = 0;; ++spins) {
    if (takeOnce(s, seq, note)) return true;
    if ((spins & 1023) == 1023 && (deadline.expired() || (abort && abort->load()) || peerGone())) return false;
    if (spins > 4096) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, nullptr);
    }
  }
}

template <typename Gone>
bool ProcessMailbox::allGather(int rank, uint64_t seq, void* out, size_t bytes, const Deadline& deadline,
                               const std::atomic<bool>* abort, Gone gone, int* missing) {
  char* o = static_cast<char*>(out);
  auto stop = [&](int r) { return deadline.expired() || (abort && abort->load()) || gone(r); };
  for (unsigned spins = 0; !postRecord(rank, seq, o + rank * bytes, bytes); ++spins) {
    // The slot's previous record is not yet collected by every peer.
    if ((spins & 1023) == 1023 && (deadline.expired() || (abort && abort->load()))) {
      *missing = -1;
      return false;
    }
    if (spins > 4096) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, nullptr);
    }
  }
  for (int r = 0; r < int(localIndex_.size()); ++r) {
    if (r == rank) continue;
    Record* rec = record(r, seq);
    for (unsigned spins = 0; rec->posted.load(std::memory_order_acquire) != seq + 1; ++spins) {
      if ((spins & 1023) == 1023 && stop(r)) {
        *missing = r;
        return false;
      }
      if (spins > 4096) {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
    memcpy(o + r * bytes, rec->data, bytes);
    rec->collected.fetch_add(1, std::memory_order_acq_rel);
  }
  return true;
}

}  // namespace gyre
