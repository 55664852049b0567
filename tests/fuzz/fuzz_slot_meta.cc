// The step headers a peer writes on the data paths (SlotMeta): the input is
// this rank's own call (a LaneSpec's fields and the step's size) and then
// the header the peer sent. The header is checked as a host lane checks a
// step it receives on shared memory or a socket (checkPeerSlotMeta), as the
// socket receiver checks a header off the wire (checkIncomingHeader: slot
// size, abort notices), and an abort notice's culprit is reported: always a
// rank of the communicator.
#include <algorithm>
#include <climits>
#include <string>

#include "src/sched/slot_meta.h"
#include "src/transport/abort_notice.h"
#include "src/transport/socket/socket_wire.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/slot_meta_input.h"

using namespace gyre;


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  fuzz::OwnStep own = in.take<fuzz::OwnStep>();
  // Ranks are this rank's own numbers: never negative, and ranks of a
  // communicator, which has at most INT32_MAX of them.
  own.rank = (own.rank & 0x7fffffff) % INT32_MAX;
  own.peer = (own.peer & 0x7fffffff) % INT32_MAX;
  const SlotMeta sent = in.take<SlotMeta>();
  LaneSpec spec;
  spec.rank = own.rank;
  // This rank's own call is one gyre made: a real collective, type and operator.
  spec.coll = static_cast<CollKind>(own.coll % 6);
  spec.datatype = static_cast<ncclDataType_t>(own.datatype % ncclNumTypes);
  spec.op = static_cast<ncclRedOp_t>(own.op % (ncclNumOps + 1));
  spec.count = own.count;
  spec.opCount = own.opCount;
  spec.root = own.root;
  const SlotMeta want = makeSlotMeta(spec, own.bytes);
  (void)checkPeerSlotMeta(own.peer, sent, own.rank, want, spec.coll);
  // The communicator holds both ranks (the peer's notice is checked against its size).
  const int nranks = std::max(own.rank, own.peer) + 1;
  int culprit = -1;
  const std::string what = "socket from rank " + std::to_string(own.peer);
  if (socket_detail::checkIncomingHeader(sent, own.slotBytes, own.peer, nranks, what, &culprit) == ncclSuccess) {
    if (sent.flags & kMetaAbort) {
      // A notice is never taken for none, nor passed on naming a rank the communicator lacks.
      if (culprit < 0 || culprit >= nranks) __builtin_trap();
      (void)failFromAbortNotice(sent.count, own.rank, own.peer, nranks);
    } else if (sent.bytes > own.slotBytes) {
      __builtin_trap();  // a step that does not fit its slot got through
    }
  }
  return 0;
}
