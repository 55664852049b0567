#include "device_comm.h"

#include <utility>

namespace torch_gyre::device {

double gyreTimeoutSeconds(double groupSeconds) {
  constexpr double kLongest = 86400;  // gyreCommSetTimeout's upper bound
  return groupSeconds > 0 && groupSeconds < kLongest ? groupSeconds : kLongest;
}

DeviceComm::DeviceComm(StreamOps& ops, int rank, int size, double timeoutSeconds, IdExchange exchange)
    : ops_(ops), rank_(rank), size_(size), timeoutSeconds_(timeoutSeconds), exchange_(std::move(exchange)) {}

DeviceComm::DeviceComm(StreamOps& ops, int rank, int size, ncclComm_t comm, int device, double timeoutSeconds)
    : ops_(ops), rank_(rank), size_(size), timeoutSeconds_(timeoutSeconds), comm_(comm), device_(device) {}

DeviceComm::~DeviceComm() {
  std::lock_guard<std::mutex> lock(mu_);
  // After a failure the peers may be gone, and destroy would wait for them.
  release(/*abort=*/!brokenBy_.empty());
}

std::string DeviceComm::who() const {
  std::string s = "rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  if (device_ >= 0) s += " on cuda:" + std::to_string(device_);
  return s;
}

bool DeviceComm::bound() const {
  std::lock_guard<std::mutex> lock(mu_);
  return comm_ != nullptr;
}

int DeviceComm::device() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_;
}

void DeviceComm::makeStream() {
  DeviceScope scope(ops_, device_);
  stream_ = ops_.createStream();
}

ncclComm_t DeviceComm::on(int device, const char* what) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closedBy_ != nullptr)
    throw DeviceError(std::string("gyre backend: ") + what + " on " + who() + ": the process group was closed by " +
                      closedBy_ + "() and runs no more operations");
  if (!brokenBy_.empty())
    throw DeviceError(std::string("gyre backend: ") + what + " on " + who() +
                      ": the device communicator failed earlier and runs no more operations: " + brokenBy_);
  if (comm_ != nullptr) {
    if (device != device_)
      throw DeviceError(std::string("gyre backend: ") + what + " got a tensor on cuda:" + std::to_string(device) +
                        " but the process group's " + who() +
                        " is on cuda:" + std::to_string(device_) +
                        " (one device per process and group; move the tensor or pass device_id)");
    return comm_;
  }
  if (device < 0) throw DeviceError(std::string("gyre backend: ") + what + ": no CUDA device " + std::to_string(device));
  ncclUniqueId id = exchange_();
  DeviceScope scope(ops_, device);
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, size_, id, rank_);
  if (r != ncclSuccess) {
    std::string why = ncclGetLastError(nullptr);
    throw DeviceError("gyre backend: rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                      " could not make its device communicator on cuda:" + std::to_string(device) + " for " + what +
                      ": ncclCommInitRank: " + ncclGetErrorString(r) + (why.empty() ? "" : ": " + why));
  }
  r = gyreCommSetTimeout(comm, gyreTimeoutSeconds(timeoutSeconds_));
  if (r != ncclSuccess) {
    std::string why = ncclGetLastError(comm);
    ncclCommAbort(comm);
    throw DeviceError("gyre backend: gyreCommSetTimeout on rank " + std::to_string(rank_) + ": " + why);
  }
  comm_ = comm;
  device_ = device;
  makeStream();
  return comm_;
}

std::unique_ptr<DeviceComm> DeviceComm::split(int device, int color, int key, double timeoutSeconds) {
  ncclComm_t parent = on(device, "split");
  ncclComm_t child = nullptr;
  ncclResult_t r;
  {
    DeviceScope scope(ops_, device_);
    r = ncclCommSplit(parent, color, key, &child, nullptr);
  }
  check(r, "ncclCommSplit");
  if (child == nullptr) return nullptr;  // NCCL_SPLIT_NOCOLOR
  int childRank = -1, childSize = 0;
  if (ncclCommUserRank(child, &childRank) != ncclSuccess || ncclCommCount(child, &childSize) != ncclSuccess ||
      gyreCommSetTimeout(child, gyreTimeoutSeconds(timeoutSeconds)) != ncclSuccess) {
    std::string why = ncclGetLastError(child);
    ncclCommAbort(child);
    throw DeviceError("gyre backend: the communicator split from " + who() + " is unusable: " + why);
  }
  std::unique_ptr<DeviceComm> made(new DeviceComm(ops_, childRank, childSize, child, device_, timeoutSeconds));
  made->makeStream();
  return made;
}

void DeviceComm::checkAsync(const char* what) {
  std::unique_lock<std::mutex> lock(mu_);
  if (comm_ == nullptr) return;
  if (!brokenBy_.empty())
    throw DeviceError(std::string("gyre backend: ") + what + " on " + who() + " failed: " + brokenBy_);
  ncclResult_t async = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(comm_, &async);
  if (r == ncclSuccess && (async == ncclSuccess || async == ncclInProgress)) return;
  ncclResult_t e = r != ncclSuccess ? r : async;
  std::string last = ncclGetLastError(comm_);
  brokenBy_ = std::string(ncclGetErrorString(e)) + (last.empty() ? "" : ": " + last);
  throw DeviceError(std::string("gyre backend: ") + what + " on " + who() + " failed: " + brokenBy_ +
                    " (gyre's asynchronous error; a peer may have died or stopped answering)");
}

void DeviceComm::raise(ncclResult_t r, const char* call) {
  std::unique_lock<std::mutex> lock(mu_);
  std::string last = ncclGetLastError(comm_);
  std::string why = std::string(ncclGetErrorString(r)) + (last.empty() ? "" : ": " + last);
  if (r != ncclInvalidArgument && r != ncclInvalidUsage && brokenBy_.empty()) brokenBy_ = why;
  throw DeviceError(std::string("gyre backend: ") + call + " on " + who() + " failed: " + why);
}

void DeviceComm::release(bool abort) {
  if (comm_ != nullptr) {
    DeviceScope scope(ops_, device_);
    if (abort) {
      // Wakes gyre's waits in flight, so abort returns without the peers.
      ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
      ncclCommAbort(comm_);
    } else if (ncclCommDestroy(comm_) != ncclSuccess) {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }
  if (stream_ != nullptr) {
    ops_.destroyStream(stream_);
    stream_ = nullptr;
  }
}

void DeviceComm::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closedBy_ != nullptr) return;
  closedBy_ = "abort";
  release(/*abort=*/true);
}

void DeviceComm::shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closedBy_ != nullptr) return;
  closedBy_ = "shutdown";
  release(/*abort=*/!brokenBy_.empty());
}

}  // namespace torch_gyre::device
