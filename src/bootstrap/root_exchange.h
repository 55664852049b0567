// The second half of a rendezvous root's work: answers to the ranks, and
// with several roots the hand-over between root i > 0 and root 0 (root i
// sends its block, root 0 answers with the whole table or the failure).
#pragma once

#include <string>
#include <vector>

#include "src/bootstrap/root_gather.h"

namespace gyre {

// A failure (kRootRefused / kRootFailed) with its message.
void sendReply(const Socket& s, int32_t status, const std::string& message, const Deadline& deadline);
// `reply`, and when it says kRootOk the table after it.
void sendTable(const Socket& s, const RootReply& reply, const std::vector<PeerInfo>& table,
               const Deadline& deadline);

// Root i > 0: delivers g's block, or g.failure, to root 0 and returns root
// 0's answer; a root 0 that cannot be reached or does not answer becomes a
// kRootFailed reply naming it.
void exchangeWithFirstRoot(const RootGather& g, double timeoutSeconds, RootReply* reply,
                           std::vector<PeerInfo>* table);

}  // namespace gyre
