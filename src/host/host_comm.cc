#include "src/host/host_comm.h"

#include "src/debug/error.h"

namespace gyre {

void HostComm::markFailed(ncclResult_t code, int culprit) {
  int expected = ncclSuccess;
  if (!asyncError->compare_exchange_strong(expected, code)) return;  // first failure wins
  {
    std::lock_guard<std::mutex> lock(*errorMutex);
    *errorText = lastErrorText();
  }
  if (culprit >= 0) progress.sendAbortNotices(culprit);
}

void HostComm::noteAsyncError(ncclResult_t code, const std::string& why) {
  int expected = ncclSuccess;
  if (asyncError->compare_exchange_strong(expected, code)) {
    std::lock_guard<std::mutex> lock(*errorMutex);
    *errorText = why;
  }
}

ncclResult_t HostComm::checkRunnable(const char* what) const {
  if (abortFlag && abortFlag->load()) return fail(ncclInvalidUsage, "%s: the communicator was aborted", what);
  int err = asyncError->load();
  if (err == ncclSuccess || err == ncclInProgress) return ncclSuccess;
  std::lock_guard<std::mutex> lock(*errorMutex);
  return fail(static_cast<ncclResult_t>(err), "%s: the communicator failed earlier: %s", what, errorText->c_str());
}

}  // namespace gyre
