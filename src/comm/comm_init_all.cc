// Several communicators in one process: ncclCommInitAll (one per listed GPU,
// a GPU may repeat) and gyreCommInitAllHost. Each rank's init blocks until all
// have joined, so they run on one thread each.
#include <thread>
#include <vector>

#include "include/gyre.h"
#include "src/bootstrap/rendezvous.h"
#include "src/comm/api_export.h"
#include "src/comm/comm_init.h"
#include "src/comm/cuda_device.h"
#include "src/debug/error.h"
#include "src/debug/fork_guard.h"

using namespace gyre;

namespace {

ncclResult_t initAll(ncclComm_t* comms, int n, const int* devlist, bool isHost, const char* fn) {
  GYRE_CHECK(checkNotForkedChild(fn));
  if (!comms) return fail(ncclInvalidArgument, "%s: comms is NULL", fn);
  if (n < 1) return fail(ncclInvalidArgument, "%s: ndev=%d must be at least 1", fn, n);
  UniqueIdContents contents;
  GYRE_CHECK(startDetachedRoot(&contents));
  ncclUniqueId id;
  encodeUniqueId(contents, &id);
  std::vector<ncclResult_t> results(n, ncclSuccess);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      if (!isHost) {
        int dev = devlist ? devlist[r] : r;
        results[r] = selectCudaDevice(dev);
      }
      if (results[r] == ncclSuccess) results[r] = initCommunicator(&comms[r], n, id, r, nullptr, isHost, fn);
      if (results[r] != ncclSuccess) errors[r] = lastErrorText();
    });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (results[r] != ncclSuccess) {
      for (int k = 0; k < n; ++k)
        if (results[k] == ncclSuccess) ncclCommDestroy(comms[k]);
      for (int k = 0; k < n; ++k) comms[k] = nullptr;
      return fail(results[r], "%s: rank %d: %s", fn, r, errors[r].c_str());
    }
  return ncclSuccess;
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return initAll(comms, ndev, devlist, /*isHost=*/false, "ncclCommInitAll");
}

GYRE_EXPORT ncclResult_t gyreCommInitAllHost(ncclComm_t* comms, int nranks) {
  return initAll(comms, nranks, nullptr, /*isHost=*/true, "gyreCommInitAllHost");
}
