#include "stream_work.h"

#include <thread>

namespace torch_gyre::device {

std::shared_ptr<StreamWork> StreamWork::launch(const std::shared_ptr<DeviceComm>& comm, int device, Stream caller,
                                               std::string what,
                                               const std::function<void(ncclComm_t, Stream)>& calls) {
  ncclComm_t c = comm->on(device, what.c_str());
  comm->checkAsync(what.c_str());
  StreamOps& ops = comm->ops();
  std::shared_ptr<StreamWork> work(new StreamWork(comm, std::move(what)));
  DeviceScope scope(ops, device);
  Event start = ops.createEvent();
  try {
    ops.record(start, caller);
    ops.streamWait(comm->stream(), start);
    calls(c, comm->stream());
    work->end_ = ops.createEvent();
    ops.record(work->end_, comm->stream());
  } catch (const DeviceError& e) {
    ops.destroyEvent(start);
    // Name the torch operation before gyre's call: "gyre backend: all_reduce: ncclAllReduce on rank ...".
    std::string text = e.what();
    const std::string prefix = "gyre backend: ";
    if (text.compare(0, prefix.size(), prefix) == 0) text.insert(prefix.size(), work->what_ + ": ");
    throw DeviceError(text);
  } catch (...) {
    ops.destroyEvent(start);
    throw;
  }
  // An event may be destroyed while the work it recorded is pending; the
  // stream's wait for it is already enqueued.
  ops.destroyEvent(start);
  return work;
}

StreamWork::~StreamWork() {
  if (end_ != nullptr) comm_->ops().destroyEvent(end_);
}

void StreamWork::hold(std::shared_ptr<void> thing) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) held_.push_back(std::move(thing));
}

void StreamWork::finished() {
  done_ = true;
  held_.clear();
}

bool StreamWork::isCompleted() {
  comm_->checkAsync(what_.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_ && comm_->ops().query(end_)) finished();
  return done_;
}

void StreamWork::blockStream(Stream s) {
  comm_->checkAsync(what_.c_str());
  comm_->ops().streamWait(s, end_);
}

void StreamWork::synchronize(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto limit = timeout.count() > 0 ? timeout : std::chrono::milliseconds(86400LL * 1000);
  const auto deadline = Clock::now() + limit;
  auto pause = std::chrono::microseconds(20);
  while (!isCompleted()) {
    if (Clock::now() >= deadline)
      throw DeviceError("gyre backend: " + what_ + " on rank " + std::to_string(comm_->rank()) + " of " +
                        std::to_string(comm_->size()) + " on cuda:" + std::to_string(comm_->device()) +
                        " did not complete within " + std::to_string(limit.count()) + " ms");
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(2)) pause *= 2;
  }
}

}  // namespace torch_gyre::device
