#include "communicator.h"

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

namespace torch_gyre {

void check(ncclResult_t r, const char* call, ncclComm_t comm) {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(comm);
  std::string text = std::string("gyre: ") + call + " failed (" + ncclGetErrorString(r) + ")";
  if (last != nullptr && *last != '\0') text += ": " + std::string(last);
  throw std::runtime_error(text);
}

namespace {

// The store key of the unique id. The store torch hands a backend is already
// prefixed per group, so one fixed name serves every group.
constexpr const char* kIdKey = "torch_gyre/unique_id";

// gyre reads GYRE_INIT_TIMEOUT once per process, at its first communicator,
// so the first group's timeout is exported before then (unless the user set
// it). It bounds only the ranks' joining at init; the timeout of the group's
// operations is set per communicator (gyreCommSetTimeout), so each group keeps
// its own.
void applyInitTimeout(std::chrono::milliseconds timeout) {
  static std::once_flag once;
  std::call_once(once, [&] {
    long seconds = std::max(1L, static_cast<long>(std::ceil(timeout.count() / 1000.0)));
    seconds = std::min(seconds, 86400L);  // gyre's allowed range is 1..86400
    setenv("GYRE_INIT_TIMEOUT", std::to_string(seconds).c_str(), /*overwrite=*/0);
  });
}

// gyre's collective timeout from the group's: at most gyre's 86400 s, and
// torch's "no timeout" (0 or negative) becomes that largest value too.
double collTimeoutSeconds(std::chrono::milliseconds timeout) {
  constexpr double kMax = 86400;
  double seconds = timeout.count() / 1000.0;
  return seconds > 0 && seconds < kMax ? seconds : kMax;
}

}  // namespace

ncclUniqueId exchangeUniqueId(const c10::intrusive_ptr<c10d::Store>& store, int rank, const char* key) {
  ncclUniqueId id{};
  if (rank == 0) {
    check(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr);
    const auto* bytes = reinterpret_cast<const uint8_t*>(id.internal);
    store->set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id.internal)));
    return id;
  }
  // get() waits for the key with the store's timeout.
  std::vector<uint8_t> bytes;
  try {
    bytes = store->get(key);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "gyre backend: rank ", rank, " waited for rank 0 to publish gyre's unique id (store key '",
                key, "') until the store gave up, after ", store->getTimeout().count(),
                " ms: is rank 0 running and using backend gyre? (", e.what(), ")");
  }
  TORCH_CHECK(bytes.size() == sizeof(id.internal), "gyre backend: the unique id in the store has ", bytes.size(),
              " bytes, expected ", sizeof(id.internal), " (another library's key?)");
  std::copy(bytes.begin(), bytes.end(), id.internal);
  return id;
}

Communicator::Communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                           std::chrono::milliseconds timeout) {
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "gyre backend: rank ", rank, " outside a group of ", size);
  applyInitTimeout(timeout);
  ncclUniqueId id = exchangeUniqueId(store, rank, kIdKey);
  check(gyreCommInitRankHost(&comm_, size, id, rank, nullptr), "gyreCommInitRankHost", nullptr);
  ncclResult_t r = gyreCommSetTimeout(comm_, collTimeoutSeconds(timeout));
  if (r != ncclSuccess) {
    std::string why = ncclGetLastError(comm_);
    ncclCommAbort(comm_);  // the destructor does not run for a throwing constructor
    comm_ = nullptr;
    TORCH_CHECK(false, "gyre backend: gyreCommSetTimeout: ", why);
  }
}

Communicator::Communicator(ncclComm_t comm, std::chrono::milliseconds timeout) : comm_(comm) {
  // A split communicator starts again from GYRE_TIMEOUT, not its parent's.
  ncclResult_t r = gyreCommSetTimeout(comm_, collTimeoutSeconds(timeout));
  if (r != ncclSuccess) {
    std::string why = ncclGetLastError(comm_);
    ncclCommAbort(comm_);
    comm_ = nullptr;
    TORCH_CHECK(false, "gyre backend: gyreCommSetTimeout: ", why);
  }
}

Communicator::~Communicator() {
  if (comm_ == nullptr) return;
  // Destroy waits for the peers to finish with the connections; after a
  // failure they may be dead, so abort instead.
  if (broken_) {
    ncclCommAbort(comm_);
  } else if (ncclCommDestroy(comm_) != ncclSuccess) {
    LOG(WARNING) << "gyre backend: ncclCommDestroy: " << ncclGetLastError(nullptr);
  }
}

}  // namespace torch_gyre
