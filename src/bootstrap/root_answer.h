// A rank's checks of the rendezvous root's answer, apart from the socket
// work of joinRendezvous: its reply (kRootOk for `nranks` ranks, or why
// not), then the peer table that follows an OK (record r is rank r's, its
// host name terminated). The answer comes off the network, so a malformed
// one fails naming the root, and nothing of it is printed unterminated.
#pragma once

#include <string>
#include <vector>

#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"

namespace gyre {

ncclResult_t checkRootReply(RootReply* reply, int nranks, const UniqueIdContents& id, const std::string& rootName);
ncclResult_t checkPeerTable(const std::vector<PeerInfo>& peers, const std::string& rootName);

}  // namespace gyre
