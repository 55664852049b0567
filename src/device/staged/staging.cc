#include "src/device/staged/staging.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "src/device/device_comm.h"
#include "src/device/launch_events.h"
#include "src/device/on_device.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/runtime.h"
#include "src/host/run_calls.h"
#include "src/call/coll_kind.h"
#include "src/call/datatypes.h"
#include "src/config/env.h"

namespace gyre {
namespace {

// Calls of at least two pieces are pipelined: while the host executor runs
// piece j, the copy engines bring piece j+1 in and take piece j-1 out.
constexpr size_t kDefaultPieceBytes = 1 << 20;
constexpr size_t kMaxPieces = 64;  // bounds the events and host functions of one call

struct StagedCall {
  DeviceRequest host;          // the call on staging buffers, as the host executor runs it
  const void* deviceInput;
  void* deviceOutput;
  bool movesInput = false;   // whether this rank reads the input / writes the output at all
  bool movesOutput = false;
  size_t pieceCount = 1;     // elements per piece (the last may be shorter)
  size_t pieces = 1;
  void* stageIn = nullptr;
  void* stageOut = nullptr;
  size_t inCapacity = 0;     // real sizes of the staging buffers (for the pool)
  size_t outCapacity = 0;
  const void* deviceScalar = nullptr;  // an ncclScalarDevice operator's scalar, copied ...
  void* stageScalar = nullptr;         // ... here with the first piece's input
  size_t scalarCapacity = 0;
};

struct StagedJob;
struct PieceRun {
  StagedJob* job;
  size_t piece;
};

struct StagedJob {
  std::vector<StagedCall> calls;
  std::vector<DeviceComm*> comms;  // distinct, each counted in its jobsInFlight
  size_t pieces = 1;             // the most pieces of any call
  std::vector<PieceRun> runs;    // one host function argument per piece
  std::atomic<bool> failed{false};  // later pieces skip the executor
};

// The streams a job's stages run on: all the user's first stream for a
// single piece, else the communicator's own three.
struct JobStreams {
  StreamHandle in, run, out;
};

size_t pieceBytesSetting() {
  static const size_t bytes = [] {
    int64_t v = static_cast<int64_t>(kDefaultPieceBytes);
    return env::getInt("GYRE_STAGING_PIECE_BYTES", &v) == ncclSuccess ? static_cast<size_t>(v) : kDefaultPieceBytes;
  }();
  return bytes;
}

// A call's own data is its count of elements; AllGather's output and
// ReduceScatter's input hold one such block per rank ("rows"). A piece takes
// the same element range of every row, so peers, which share count and
// type, cut their calls alike.
void planPieces(StagedCall* s) {
  const DeviceRequest& c = s->host;
  size_t elementSize = datatypeSize(c.datatype);
  size_t byBytes = std::max<size_t>(1, pieceBytesSetting() / elementSize);
  size_t byLimit = (c.count + kMaxPieces - 1) / kMaxPieces;
  s->pieceCount = std::max(byBytes, byLimit);
  s->pieces = c.count == 0 ? 1 : (c.count + s->pieceCount - 1) / s->pieceCount;
}

size_t inputRows(const DeviceRequest& c) { return inputBlocks(c.coll, c.comm->nranks); }
size_t outputRows(const DeviceRequest& c) { return outputBlocks(c.coll, c.comm->nranks); }

// Which side of the call this rank moves at all.
void stagedSides(const DeviceRequest& c, bool* in, bool* out) {
  bool root = c.comm->rank == c.root;
  *in = *out = true;
  switch (c.coll) {
    case CollKind::Broadcast: *in = root; return;  // sendbuff is read only at the root
    case CollKind::Reduce: *out = root; return;    // recvbuff is written only at the root
    case CollKind::SendRecv: *in = c.isSend; *out = !c.isSend; return;
    default: return;
  }
}

// Element range [first, first + count) of piece `piece`.
void pieceRange(const StagedCall& s, size_t piece, size_t* first, size_t* count) {
  *first = std::min(piece * s.pieceCount, s.host.count);
  *count = std::min(s.pieceCount, s.host.count - *first);
}

// A host buffer of at least `bytes` from the communicator's pool; `capacity`
// is its real size, under which it goes back to the pool.
ncclResult_t takeBuffer(DeviceComm* comm, size_t bytes, void** out, size_t* capacity) {
  StagingState& s = *comm->staging;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.buffers.takeFree(bytes, out, capacity)) return ncclSuccess;
  }
  *capacity = std::max<size_t>(bytes, 4096);
  // cudaHostAlloc is unsafe during capture: in Global mode it would break
  // another thread's capture (PyTorch's, say) and fail.
  RelaxedCapture relaxed;
  GYRE_CHECK(deviceRuntime()->allocHost(*capacity, out));
  std::lock_guard<std::mutex> lock(s.mutex);
  s.buffers.all.push_back(*out);
  return ncclSuccess;
}

// Host functions may not call the runtime: these only touch host state.
// One piece of every call of the job, run together on the host executor.
void runPiece(void* arg) {
  auto* run = static_cast<PieceRun*>(arg);
  StagedJob* job = run->job;
  if (job->failed.load()) return;  // an earlier piece failed and said why; do not wait out timeouts again
  std::vector<std::unique_lock<std::mutex>> locks;
  std::vector<DeviceComm*> order = job->comms;
  std::sort(order.begin(), order.end());  // a fixed order, so two jobs never lock crosswise
  for (DeviceComm* c : order) locks.emplace_back(c->staging->executorMutex);
  std::vector<HostCall> calls;
  ncclResult_t r = ncclSuccess;
  for (DeviceComm* c : job->comms)
    if (r == ncclSuccess) r = c->host->checkRunnable("staged collective");
  for (const StagedCall& s : job->calls) {
    size_t first = 0, count = 0;
    pieceRange(s, run->piece, &first, &count);
    size_t elementSize = datatypeSize(s.host.datatype);
    HostCall c;
    static_cast<CollCall&>(c) = s.host;
    c.comm = s.host.comm->host;
    c.count = count;  // 0 past this call's last piece: the executor skips it
    c.callCount = s.host.count;
    c.input = static_cast<const char*>(s.host.input) + inputRows(s.host) * first * elementSize;
    c.output = static_cast<char*>(s.host.output) + outputRows(s.host) * first * elementSize;
    calls.push_back(c);
  }
  if (r == ncclSuccess) r = runHostCalls(calls);
  if (r != ncclSuccess) {
    job->failed.store(true);
    // The failing rank already marked its communicators; make sure each one
    // of this job reports the error through ncclCommGetAsyncError.
    std::string why = lastErrorText();
    for (DeviceComm* c : job->comms) c->host->noteAsyncError(r, why);
    GYRE_WARN("staged collective failed: %s", why.c_str());
  }
}

// The worker could not run the piece: the job fails, saying why.
void abandonPiece(void* arg, const char* why) {
  StagedJob* job = static_cast<PieceRun*>(arg)->job;
  job->failed.store(true);
  std::string text = std::string("staged collective: ") + why;
  for (DeviceComm* c : job->comms) c->host->noteAsyncError(ncclRemoteError, text);
  GYRE_WARN("%s", text.c_str());
}

// Hands piece `piece` to the worker of the job's first communicator: it
// runs once the run stream has the piece's input, and the run stream waits
// for it.
ncclResult_t runOnWorker(DeviceRuntime* rt, StagedJob* job, size_t piece, StreamHandle run) {
  DeviceComm* comm = job->comms.front();
  StagingState& s = *comm->staging;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.worker.started()) GYRE_CHECK(s.worker.start(comm->cudaDev));
  }
  StagingWorker::Piece p;
  p.run = runPiece;
  p.abandon = abandonPiece;
  p.arg = &job->runs[piece];
  p.timeoutSeconds = comm->collTimeoutSeconds;
  GYRE_CHECK(rt->eventCreate(&p.inputReady));
  ncclResult_t r = rt->eventRecord(p.inputReady, run);
  if (r != ncclSuccess) {
    rt->eventDestroy(p.inputReady);
    return r;
  }
  return s.worker.enqueue(p, run);
}

void finishJob(void* arg) {
  std::unique_ptr<StagedJob> job(static_cast<StagedJob*>(arg));
  for (const StagedCall& c : job->calls) {
    StagingState& s = *c.host.comm->staging;
    std::lock_guard<std::mutex> lock(s.mutex);
    s.buffers.giveBack(c.stageIn, c.inCapacity);
    s.buffers.giveBack(c.stageOut, c.outCapacity);
    if (c.stageScalar) s.buffers.giveBack(c.stageScalar, c.scalarCapacity);
  }
  for (DeviceComm* comm : job->comms) {
    StagingState& s = *comm->staging;
    std::lock_guard<std::mutex> lock(s.mutex);
    --s.jobsInFlight;
    s.idle.notify_all();
  }
}

// One piece between device and host: `rows` rows of the piece's elements,
// a call's count apart on the device and back to back on the host.
ncclResult_t copyPiece(DeviceRuntime* rt, const StagedCall& s, size_t piece, bool toHost, StreamHandle stream) {
  size_t first = 0, count = 0;
  pieceRange(s, piece, &first, &count);
  if (count == 0) return ncclSuccess;
  size_t elementSize = datatypeSize(s.host.datatype);
  size_t rows = toHost ? inputRows(s.host) : outputRows(s.host);
  size_t width = count * elementSize, devicePitch = s.host.count * elementSize;
  char* host = static_cast<char*>(toHost ? s.stageIn : s.stageOut) + rows * first * elementSize;
  if (toHost) {
    const char* device = static_cast<const char*>(s.deviceInput) + first * elementSize;
    if (rows == 1) return rt->copyAsync(host, device, width, stream);
    return rt->copy2DAsync(host, width, device, devicePitch, width, rows, stream);
  }
  char* device = static_cast<char*>(s.deviceOutput) + first * elementSize;
  if (rows == 1) return rt->copyAsync(device, host, width, stream);
  return rt->copy2DAsync(device, devicePitch, host, width, width, rows, stream);
}

// The pipeline, from the moment the driver holds every stream's prior work
// to the moment it holds the job's last output copy:
//   in:  copy in 0 | copy in 1 | copy in 2 ...
//   run:             run 0     | run 1     | run 2 ...
//   out:                         copy out 0| copy out 1 ...
// `queuedRun` says whether a host function holding the job was queued.
ncclResult_t enqueuePieces(DeviceRuntime* rt, StagedJob* job, const JobStreams& js, StreamHandle driver,
                           bool* queuedRun) {
  GYRE_CHECK(joinStreams(driver, js.in));
  for (size_t piece = 0; piece < job->pieces; ++piece) {
    for (const StagedCall& s : job->calls) {
      if (s.movesInput) GYRE_CHECK(copyPiece(rt, s, piece, true, js.in));
      if (piece == 0 && s.deviceScalar)
        GYRE_CHECK(rt->copyAsync(s.stageScalar, s.deviceScalar, datatypeSize(s.host.datatype), js.in));
    }
    GYRE_CHECK(joinStreams(js.in, js.run));
    GYRE_CHECK(runOnWorker(rt, job, piece, js.run));
    *queuedRun = true;
    GYRE_CHECK(joinStreams(js.run, js.out));
    for (const StagedCall& s : job->calls)
      if (s.movesOutput) GYRE_CHECK(copyPiece(rt, s, piece, false, js.out));
  }
  return joinStreams(js.out, driver);
}

// The communicator's own streams, made on its device at first use.
ncclResult_t pipelineStreams(DeviceComm* comm, JobStreams* js) {
  StagingState& s = *comm->staging;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.ownStreams[0]) {
    DeviceRuntime* rt = deviceRuntime();
    OnDevice onDevice;
    GYRE_CHECK(onDevice.enter(comm->cudaDev, comm->rank));
    for (StreamHandle& stream : s.ownStreams) GYRE_CHECK(rt->streamCreate(&stream));
  }
  *js = {s.ownStreams[0], s.ownStreams[1], s.ownStreams[2]};
  return ncclSuccess;
}

// A staged piece is a host function that waits for the peers' pieces. CUDA
// forbids host functions in a graph to wait on other work (they may run on
// one thread, one after another), so a captured call cannot stage: it is
// refused, naming what made it stage.
std::string whyStaged(const DeviceRequest& c) {
  if (env::getString("GYRE_DEVICE_PATH") == "staged") return "GYRE_DEVICE_PATH=staged";
  if (c.coll == CollKind::SendRecv)
    return "no device copy reaches rank " + std::to_string(c.root) + " (a rank of this process on another GPU, a "
           "buffer CUDA IPC cannot share, or every capture slot to that rank taken)";
  if (c.comm->direct)
    return "the direct path cannot take it: a rank's buffer CUDA IPC cannot share, or every capture slot taken";
  return "neither collective kernels nor the direct path run it on this communicator";
}

ncclResult_t refuseCapture(DeviceRuntime* rt, const DeviceRequest& c) {
  bool capturing = false;
  GYRE_CHECK(rt->isCapturing(c.stream, &capturing));
  if (!capturing) return ncclSuccess;
  return fail(ncclInvalidUsage, "rank %d: %s (count %zu) is captured into a CUDA graph but would be staged through "
              "host memory (%s); staged pieces are host functions that wait for peers, which a graph cannot hold. "
              "Capture it where a device path takes it, or call it outside the capture", c.comm->rank,
              c.coll == CollKind::SendRecv ? (c.isSend ? "ncclSend" : "ncclRecv") : collName(c.coll), c.count,
              whyStaged(c).c_str());
}

ncclResult_t prepareCall(const DeviceRequest& c, StagedCall* s) {
  s->host = c;
  s->deviceInput = c.input;
  s->deviceOutput = c.output;
  stagedSides(c, &s->movesInput, &s->movesOutput);
  planPieces(s);
  // Both buffers get the larger side's size: the executor wants valid
  // pointers even where a side moves no bytes (a Broadcast's non-root input).
  size_t need = c.count * datatypeSize(c.datatype) * std::max(inputRows(c), outputRows(c));
  GYRE_CHECK(takeBuffer(c.comm, need, &s->stageIn, &s->inCapacity));
  GYRE_CHECK(takeBuffer(c.comm, need, &s->stageOut, &s->outCapacity));
  s->host.input = s->stageIn;
  s->host.output = s->stageOut;
  if (c.scalar.devicePtr) {
    s->deviceScalar = c.scalar.devicePtr;
    GYRE_CHECK(takeBuffer(c.comm, datatypeSize(c.datatype), &s->stageScalar, &s->scalarCapacity));
    s->host.stagedScalar = s->stageScalar;
  }
  return ncclSuccess;
}

// A call's stream and its communicator's device.
struct CallStream {
  StreamHandle stream;
  int device;
  int rank;
};

// Joins every call's stream but `driver` into it (intoDriver), or it into
// them. A join's event is made on the device of the stream it records on:
// a job's calls may be ranks of several GPUs driven from one thread.
ncclResult_t joinCallStreams(const std::vector<CallStream>& streams, const CallStream& driver, bool intoDriver) {
  for (const CallStream& s : streams) {
    if (s.stream == driver.stream) continue;
    const CallStream& signaler = intoDriver ? s : driver;
    OnDevice onDevice;
    GYRE_CHECK(onDevice.enter(signaler.device, signaler.rank));
    GYRE_CHECK(intoDriver ? joinStreams(s.stream, driver.stream) : joinStreams(driver.stream, s.stream));
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t launchStagedCalls(const std::vector<DeviceRequest>& calls) {
  DeviceRuntime* rt = deviceRuntime();
  if (!rt) return fail(ncclInvalidUsage, "device collectives need the CUDA runtime, which this build lacks");
  // The job's stream work goes on the first call's stream, with its
  // communicator's device current.
  const DeviceComm* lead = calls.front().comm;
  OnDevice onDevice;
  GYRE_CHECK(onDevice.enter(lead->cudaDev, lead->rank));
  auto job = std::make_unique<StagedJob>();
  std::vector<CallStream> streams;
  for (const DeviceRequest& c : calls) GYRE_CHECK(refuseCapture(rt, c));
  for (const DeviceRequest& c : calls) {
    const uint64_t seq = c.coll == CollKind::SendRecv ? 0 : ++c.comm->staging->collsStaged;
    // The host executor picks its protocol per piece when the piece runs: unknown here.
    if (observedDeviceCalls(c.comm)) startDeviceCallEvent(c, seq, 1, kStagedAlgo, "unknown");
    job->calls.emplace_back();
    GYRE_CHECK(prepareCall(c, &job->calls.back()));
    job->pieces = std::max(job->pieces, job->calls.back().pieces);
    if (std::find(job->comms.begin(), job->comms.end(), c.comm) == job->comms.end()) job->comms.push_back(c.comm);
    if (std::none_of(streams.begin(), streams.end(), [&](const CallStream& s) { return s.stream == c.stream; }))
      streams.push_back({c.stream, c.comm->cudaDev, c.comm->rank});
  }
  StreamHandle driver = calls.front().stream;
  const CallStream driving{driver, lead->cudaDev, lead->rank};
  JobStreams js{driver, driver, driver};
  if (job->pieces > 1) GYRE_CHECK(pipelineStreams(job->comms.front(), &js));
  for (size_t piece = 0; piece < job->pieces; ++piece) job->runs.push_back({job.get(), piece});

  bool queuedRun = false;
  GYRE_CHECK(joinCallStreams(streams, driving, true));
  for (DeviceComm* comm : job->comms) {
    GYRE_CHECK(comm->staging->order.followLast(driver));
    std::lock_guard<std::mutex> lock(comm->staging->mutex);
    ++comm->staging->jobsInFlight;
  }
  StagedJob* raw = job.release();
  ncclResult_t r = enqueuePieces(rt, raw, js, driver, &queuedRun);
  if (r != ncclSuccess && !queuedRun) {
    finishJob(raw);
    return r;
  }
  // finishJob is queued even when a later copy could not be: the job is on
  // a stream, and its communicators count it until finishJob runs.
  // `raw` may be finished and freed from here on: only its communicators are used.
  std::vector<DeviceComm*> comms = raw->comms;
  ncclResult_t finish = rt->hostFunc(driver, finishJob, raw);
  ncclResult_t joined = joinCallStreams(streams, driving, false);
  ncclResult_t noted = ncclSuccess;
  for (DeviceComm* comm : comms)
    if (noted == ncclSuccess) noted = comm->staging->order.note(driver);
  return r != ncclSuccess ? r : finish != ncclSuccess ? finish : joined != ncclSuccess ? joined : noted;
}

bool drainStaging(DeviceComm* comm, double seconds) {
  if (!comm->staging) return true;
  StagingState& s = *comm->staging;
  std::unique_lock<std::mutex> lock(s.mutex);
  bool drained = s.idle.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return s.jobsInFlight == 0; });
  if (!drained) return false;
  DeviceRuntime* rt = deviceRuntime();
  s.buffers.releaseAll([](void* p) { freeAfterDeviceWork(DeferredFree::kHost, p); });
  s.worker.stop();         // idle: no job is in flight, and it never takes this mutex
  s.order.destroy();
  for (StreamHandle& stream : s.ownStreams)
    if (stream && rt) rt->streamDestroy(stream);
  for (StreamHandle& stream : s.ownStreams) stream = nullptr;
  return true;
}

}  // namespace gyre
