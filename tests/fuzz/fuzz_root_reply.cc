// A rank's side of the rendezvous: the root's reply and, when it says OK,
// the peer table after it, checked as joinRendezvous checks them. The first
// input byte picks the communicator size the rank expects (1..16) and
// whether its id came from NCCL_COMM_ID (whose refusal reads differently).
#include <string>
#include <vector>

#include "src/bootstrap/root_answer.h"
#include "tests/fuzz/fuzz_input.h"

using namespace gyre;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t shape = in.take<uint8_t>();
  const int nranks = 1 + (shape & 15);
  UniqueIdContents id;
  NetAddress::parse("127.0.0.1:29500", &id.root, nullptr);
  id.fixedAddress = (shape & 16) != 0;
  const std::string rootName = "rendezvous root at " + id.root.toString();
  RootReply reply = in.take<RootReply>();
  if (checkRootReply(&reply, nranks, id, rootName) != ncclSuccess) return 0;
  std::vector<PeerInfo> peers(static_cast<size_t>(nranks));
  for (PeerInfo& p : peers) p = in.take<PeerInfo>();
  if (checkPeerTable(peers, rootName) != ncclSuccess) return 0;
  // What the communicator then prints of each peer.
  size_t printed = 0;
  for (const PeerInfo& p : peers) printed += std::string(p.host).size() + NetAddress::fromWire(p.listen).toString().size();
  return printed == 0 ? 0 : 0;
}
