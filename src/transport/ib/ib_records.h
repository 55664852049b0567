// The two records the IB network reads from its peer before any verbs work:
// the handle listen() writes (which travels to the sender through the
// bootstrap) and the QpInfo each side sends over the set-up socket. Both
// are the peer's bytes, so each is checked before anything of it is used.
#pragma once

#include <string>

#include "include/gyre.h"
#include "src/bootstrap/net_address.h"
#include "src/transport/ib/ib_comm.h"

namespace gyre::ib {

constexpr uint32_t kRecordMagic = 0x6779'4942;  // "gyIB"

// What listen() writes into the handle.
struct Handle {
  uint32_t magic;
  WireAddress addr;
};

// The set-up address a handle names; fails unless the IB network made it.
ncclResult_t handleAddress(const void* handle, NetAddress* out);

// Whether the peer's QpInfo fits this side's `mine`: the IB network's
// record, as many QPs, and an MTU that verbs knows. Fails naming `what`.
ncclResult_t checkQpInfo(const QpInfo& theirs, const QpInfo& mine, const std::string& what);

}  // namespace gyre::ib
