// The handle ncclCommWindowRegister gives out (api_memory.cc), also read by
// the one-sided entry points (api_one_sided.cc) to check a window argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "include/gyre.h"

struct ncclWindow_vidmem {
  uint64_t magic;
  ncclComm* comm;
  void* buff;
  size_t size;
  int flags;
  // Every rank's buffer, by rank, where all ranks of the communicator live in
  // this process (a peer's window is then a plain pointer); empty otherwise.
  std::vector<void*> peerBuffs;
};

namespace gyre {

constexpr uint64_t kWindowMagic = 0x6779726577696e31ull;  // "gyrewin1"

// Whether `win` is a live window of `comm` (takes comm->registrationMutex).
bool isWindowOf(ncclComm* comm, ncclWindow_t win);

}  // namespace gyre
