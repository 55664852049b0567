// The records of the network handshakes: the socket transport's
// parameters record (step size, data sockets) that a sender sends after its
// ConnHello, and the IB network's handle (sent through the bootstrap) and
// QpInfo record (sent over its set-up socket). Net plugins' handles are
// opaque to gyre: it passes them to the plugin unread. The first bytes
// choose this rank's own settings.
#include <cstring>
#include <string>

#include "src/transport/ib/ib_records.h"
#include "src/transport/net/net_v8.h"
#include "src/transport/socket/socket_wire.h"
#include "tests/fuzz/fuzz_input.h"

using namespace gyre;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t mineByte = in.take<uint8_t>();
  socket_detail::SocketCounts mine;
  mine.nthreads = 1 + (mineByte & 7);
  mine.nsocks = 1 + ((mineByte >> 3) & 7);
  const uint64_t slotBytes = uint64_t{1} << (12 + (mineByte >> 6));
  const auto params = in.take<socket_detail::SocketParams>();
  if (socket_detail::checkSocketParams(params, slotBytes, mine, "socket from rank 1", 1, 0) == ncclSuccess &&
      (params.slotBytes != slotBytes || int64_t{params.nthreads} * params.nsocks != mine.total()))
    __builtin_trap();

  char handle[GYRE_NET_HANDLE_MAXSIZE];
  const auto handleBytes = in.take<ib::Handle>();
  memset(handle, 0, sizeof(handle));
  memcpy(handle, &handleBytes, sizeof(handleBytes));
  NetAddress addr;
  if (ib::handleAddress(handle, &addr) == ncclSuccess) (void)addr.toString();

  ib::QpInfo myQps{};
  myQps.magic = ib::kRecordMagic;
  myQps.nqps = 1 + (mineByte & 3);
  myQps.mtu = IBV_MTU_4096;
  const ib::QpInfo theirs = in.take<ib::QpInfo>();
  (void)ib::checkQpInfo(theirs, myQps, "mlx5_0:1 -> 127.0.0.1:40000");
  return 0;
}
