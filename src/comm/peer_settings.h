// What every rank of a communicator must agree on at init, checked on the
// PeerInfo records all ranks received from the bootstrap, so a mismatch is
// reported with the same text everywhere.
#pragma once

#include <cstdint>
#include <vector>

#include "include/gyre.h"
#include "src/bootstrap/wire.h"

namespace gyre {

// All ranks made the same kind of communicator (host memory or device), and
// agree on the bytes of buffering per connection: where no rank set
// NCCL_BUFFSIZE, each rank's value follows its CPU and its host's rank count
// (hostFifoBytesForCpu, computed here from the PeerInfo records, so alike on
// every rank) and all take the smallest (*allDefault true); otherwise every
// rank must have the same value.
ncclResult_t agreeOnPeerSettings(const std::vector<PeerInfo>& peers, int64_t* buffSize, bool* allDefault);

}  // namespace gyre
