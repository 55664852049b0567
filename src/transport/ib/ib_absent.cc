// Built when infiniband/verbs.h was missing at build time: no IB network.
#include "src/transport/ib/ib_net.h"

namespace gyre {

ncclResult_t probeIbNetwork(Network* out, std::string* whyNot) {
  out->api = nullptr;
  *whyNot = "gyre was built without infiniband/verbs.h (install libibverbs-dev and rebuild)";
  return ncclSuccess;
}

}  // namespace gyre
