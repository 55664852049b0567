#include "src/observe/observer.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include "src/call/datatypes.h"
#include "src/debug/log.h"
#include "src/observe/clock.h"
#include "src/observe/nvtx_ranges.h"
#include "src/observe/profiler_plugin.h"
#include "src/observe/status_server.h"

namespace gyre {
namespace {

// NCCL's function names in profiler events ("AllReduce", "Send", ...).
const char* profilerFuncName(ApiFunc f) { return apiFuncName(f) + 4; }  // without "nccl"

// The profiler's group API event of this thread's open group: started by
// the group's first call on a profiled communicator, on that communicator's
// plugin context, stopped by the group's end. Plain thread-locals: read
// only where a profiler is active or a group ends.
__thread CommObserver* groupApiOwner = nullptr;
__thread void* groupApiEvent = nullptr;
__thread void* loneGroupApiEvent = nullptr;  // a lone call's own, while it runs
__thread bool nvtxGroupOpen = false;

// Profiler events of the host executor's runs on this thread, in start
// order; HostRunScope stops its own at its end. The count is a plain
// thread-local so a run without a profiler touches nothing else.
struct RunEvent {
  CommObserver* owner;
  void* handle;
  bool isGroup;
  // A Coll or P2p event's call, for the lanes that look for their parent
  // (stepev::laneParent): the sequence number, or the peer and direction.
  bool p2p = false;
  uint64_t seq = 0;
  int peer = -1;
  bool isSend = false;
};
__thread size_t runEventCount = 0;
std::vector<RunEvent>& runEvents() {
  thread_local std::vector<RunEvent> events;
  return events;
}

profiler::EventDescr descrFor(const CommObserver& o, int type, void* parent) {
  profiler::EventDescr d{};
  d.type = static_cast<uint64_t>(type);
  d.parentObj = parent;
  d.rank = o.rank;
  return d;
}

void* startApiEvent(CommObserver& o, const CollCall& call, ApiFunc f, void* parent, bool graphCaptured) {
  const bool p2p = call.coll == CollKind::SendRecv;
  if (!(o.profilerMask & (p2p ? profiler::kP2pApi : profiler::kCollApi))) return nullptr;
  profiler::EventDescr d = descrFor(o, p2p ? profiler::kP2pApi : profiler::kCollApi, parent);
  if (p2p) {
    d.p2pApi.func = profilerFuncName(f);
    d.p2pApi.count = call.count;
    d.p2pApi.datatype = profiler::datatypeName(call.datatype);
    d.p2pApi.stream = call.stream;
    d.p2pApi.graphCaptured = graphCaptured;
  } else {
    d.collApi.func = profilerFuncName(f);
    d.collApi.count = call.count;
    d.collApi.datatype = profiler::datatypeName(call.datatype);
    d.collApi.root = call.root;
    d.collApi.stream = call.stream;
    d.collApi.graphCaptured = graphCaptured;
  }
  return profiler::start(o.profilerContext, &d);
}

void* startGroupApiEvent(CommObserver& o, int depth, bool graphCaptured) {
  if (!(o.profilerMask & profiler::kGroupApi)) return nullptr;
  profiler::EventDescr d = descrFor(o, profiler::kGroupApi, nullptr);
  d.groupApi.graphCaptured = graphCaptured;
  d.groupApi.groupDepth = depth;
  return profiler::start(o.profilerContext, &d);
}

// This run's group event for `o`, started on first need.
void* runGroupEvent(CommObserver& o, size_t firstOfRun) {
  std::vector<RunEvent>& events = runEvents();
  for (size_t i = firstOfRun; i < events.size(); ++i)
    if (events[i].isGroup && events[i].owner == &o) return events[i].handle;
  if (!(o.profilerMask & profiler::kGroup)) return nullptr;
  profiler::EventDescr d = descrFor(o, profiler::kGroup, nullptr);
  void* h = profiler::start(o.profilerContext, &d);
  if (h) {
    events.push_back({&o, h, true});
    runEventCount = events.size();
  }
  return h;
}

__thread size_t runFirstEvent = 0;  // where the innermost HostRunScope's events begin
// Active HostRunScopes on this thread: events start only inside one (a
// scope made before the first profiler appeared is inactive, and nothing
// would stop its events).
__thread int activeRunScopes = 0;

void* startRunEvent(CommObserver& o, const CollCall& call, const CommObserver::Planned& planned, uint64_t seq) {
  if (activeRunScopes == 0) return nullptr;
  const bool p2p = call.coll == CollKind::SendRecv;
  void* group = runGroupEvent(o, runFirstEvent);
  if (!(o.profilerMask & (p2p ? profiler::kP2p : profiler::kColl))) return nullptr;
  const ApiFunc f = apiFuncOf(call.coll, call.isSend);
  profiler::EventDescr d = descrFor(o, p2p ? profiler::kP2p : profiler::kColl, group);
  if (p2p) {
    d.p2p.func = profilerFuncName(f);
    d.p2p.buff = call.isSend ? const_cast<void*>(call.input) : call.output;
    d.p2p.datatype = profiler::datatypeName(call.datatype);
    d.p2p.count = call.count;
    d.p2p.peer = call.root;
    d.p2p.nChannels = static_cast<uint8_t>(std::min(planned.nchannels, 255));
    d.p2p.parentGroup = group;
  } else {
    d.coll.seqNumber = seq;
    d.coll.func = profilerFuncName(f);
    d.coll.sendBuff = call.input;
    d.coll.recvBuff = call.output;
    d.coll.count = call.count;
    d.coll.root = call.root;
    d.coll.datatype = profiler::datatypeName(call.datatype);
    d.coll.nChannels = static_cast<uint8_t>(std::min(planned.nchannels, 255));
    d.coll.nWarps = 0;  // the host executor runs no warps
    d.coll.algo = planned.algorithm;
    d.coll.proto = planned.protocol;
    d.coll.parentGroup = group;
  }
  void* h = profiler::start(o.profilerContext, &d);
  if (h) {
    runEvents().push_back({&o, h, false, p2p, seq, call.root, call.isSend});
    runEventCount = runEvents().size();
  }
  return h;
}

void markLive(CommObserver& o, uint8_t func, uint64_t since) {
  o.liveSince.store(since, std::memory_order_relaxed);
  o.liveSeq.store(o.liveSeq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  o.liveFunc.store(func, std::memory_order_relaxed);
}

}  // namespace

uint64_t commIdOf(uint64_t secret) {
  // splitmix64's finaliser: one-way enough that the id does not hand out
  // the secret that admits a process to the communicator's connections.
  uint64_t z = secret + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void startObserving(CommObserver* o, uint64_t secret, const std::vector<PeerInfo>& peers, int rank, bool isHost) {
  o->commId = commIdOf(secret);
  o->secret = secret;
  o->rank = rank;
  o->nranks = static_cast<int>(peers.size());
  std::set<uint64_t> hosts;
  for (const PeerInfo& p : peers) {
    hosts.insert(p.hostHash);
    o->peerPids.push_back(p.pid);
    o->peerHosts.push_back(std::string(p.host, strnlen(p.host, sizeof p.host)));
  }
  o->nNodes = static_cast<int>(hosts.size());
  o->isHost = isHost;
  o->profiled = profiler::initForComm(o->commId, o->nNodes, o->nranks, rank, &o->profilerContext,
                                      &o->profilerMask);
  if (o->profilerMask) anyProfiler = true;  // never reset: a run may start as another communicator ends
  statusRegister(o);
}

void stopObserving(CommObserver* o) {
  // A call that ncclCommAbort interrupted has left the executor (the
  // communicator's activeCalls) but may still be closing its scope here.
  for (int i = 0; i < 100000 && o->liveFunc.load(std::memory_order_acquire) != 0; ++i) std::this_thread::yield();
  statusUnregister(o);
  if (logLevel() >= LogLevel::Info) {
    std::vector<std::string> lines = describeCounters(snapshotOf(o->counters));
    if (lines.empty())
      GYRE_INFO("COLL", "communicator %016llx rank %d made no calls", static_cast<unsigned long long>(o->commId),
                o->rank);
    for (const std::string& l : lines)
      GYRE_INFO("COLL", "communicator %016llx rank %d: %s", static_cast<unsigned long long>(o->commId), o->rank,
                l.c_str());
  }
  if (o->profiled) profiler::finalizeForComm(o->profilerContext);
  o->profiled = false;
  o->profilerMask = 0;
}

ApiCallScope::ApiCallScope(CommObserver& o, const CollCall& call, int groupDepth, bool graphCaptured)
    : ApiCallScope(o, call, groupDepth, graphCaptured, apiFuncOf(call.coll, call.isSend)) {}

ApiCallScope::ApiCallScope(CommObserver& o, const CollCall& call, int groupDepth, bool graphCaptured, ApiFunc f)
    : o_(o), counters_(o.counters.api[static_cast<int>(f)]), lone_(groupDepth == 0) {
  counters_.calls.add(1);
  counters_.bytes.add(call.count * datatypeSize(call.datatype));
  if (lone_) {
    start_ = readTicks();
    markLive(o, static_cast<uint8_t>(static_cast<int>(f) + 1), start_);
  } else {
    counters_.groupedCalls.add(1);
  }
  if (nvtx::enabled()) {
    nvtx::pushCall(f, call, o.commId, o.rank, o.nranks);
    nvtx_ = true;
  }
  if (o.profilerMask) {
    void* parent = nullptr;
    if (lone_) {
      parent = groupEvent_ = loneGroupApiEvent = startGroupApiEvent(o, 0, graphCaptured);
    } else {
      if (!groupApiOwner) {
        groupApiOwner = &o;
        // The group's first call on a profiled communicator speaks for it.
        groupApiEvent = startGroupApiEvent(o, groupDepth, graphCaptured);
      }
      if (groupApiOwner == &o) parent = groupApiEvent;
    }
    apiEvent_ = startApiEvent(o, call, f, parent, graphCaptured);
  }
}

ApiCallScope::~ApiCallScope() {
  if (apiEvent_) profiler::stop(apiEvent_);
  if (groupEvent_) {
    profiler::stop(groupEvent_);
    loneGroupApiEvent = nullptr;
  }
  if (nvtx_) nvtx::pop();
  if (lone_) {
    counters_.ticks.add(readTicks() - start_);
    // The last touch of the communicator: ncclCommAbort on another thread
    // may free it once this is seen (stopObserving waits for it).
    o_.liveFunc.store(0, std::memory_order_release);
  }
}

void observeGroupStart(int depthAfter) {
  if (depthAfter == 1 && nvtx::enabled()) {
    nvtx::pushGroup();
    nvtxGroupOpen = true;
  }
}

GroupEndScope::GroupEndScope() : start_(readTicks()) {
  if (groupApiEvent) profiler::recordState(groupApiEvent, profiler::kGroupEndApiStart);
}

void GroupEndScope::add(CommObserver& o) {
  if (std::find(comms_.begin(), comms_.end(), &o) != comms_.end()) return;
  comms_.push_back(&o);
  markLive(o, kLiveGroupEnd, start_);
}

GroupEndScope::~GroupEndScope() {
  if (groupApiEvent) profiler::stop(groupApiEvent);
  groupApiEvent = nullptr;
  groupApiOwner = nullptr;
  const uint64_t ticks = readTicks() - start_;
  for (CommObserver* o : comms_) {
    o->counters.groups.add(1);
    o->counters.groupTicks.add(ticks);
    o->liveFunc.store(0, std::memory_order_release);  // its last touch, as in ~ApiCallScope
  }
  if (nvtxGroupOpen) nvtx::pop();
  nvtxGroupOpen = false;
}

void observeHostCall(CommObserver& o, const CollCall& call, ExecPath path, const char* protocol, int nchannels,
                     uint64_t seq) {
  if (!o.isHost) return;  // a device communicator's staged pieces: its API calls are what it counts
  const ApiFunc f = apiFuncOf(call.coll, call.isSend);
  CallCounters& c = o.counters.api[static_cast<int>(f)];
  const uint64_t bytes = call.count * datatypeSize(call.datatype);
  c.pathCalls[static_cast<int>(path)].add(1);
  c.pathBytes[static_cast<int>(path)].add(bytes);
  CommObserver::Planned& planned = o.lastPlanned[static_cast<int>(f)];
  // Lanes: the ring's channels, the two trees, else one.
  const int lanes = path == ExecPath::Ring ? nchannels : path == ExecPath::Tree ? 2 : 1;
  planned = {path, execPathName(path), protocol, lanes, bytes};
  if (o.profilerMask) startRunEvent(o, call, planned, seq);
}

void observeRepeatedCall(CommObserver& o, const CollCall& call, uint64_t seq) {
  if (!o.isHost) return;
  const ApiFunc f = apiFuncOf(call.coll, call.isSend);
  const CommObserver::Planned& planned = o.lastPlanned[static_cast<int>(f)];
  CallCounters& c = o.counters.api[static_cast<int>(f)];
  c.pathCalls[static_cast<int>(planned.path)].add(1);
  c.pathBytes[static_cast<int>(planned.path)].add(planned.bytes);
  if (o.profilerMask) startRunEvent(o, call, planned, seq);
}

std::atomic<bool> anyProfiler{false};

namespace stepev {

bool wantsSteps(const CommObserver* o) {
  return o && activeRunScopes > 0 && (o->profilerMask & (profiler::kProxyOp | profiler::kProxyStep));
}

void* laneParent(CommObserver* o, bool p2p, uint64_t seq, int peer, bool isSend) {
  const std::vector<RunEvent>& events = runEvents();
  for (size_t i = runFirstEvent; i < events.size(); ++i) {
    const RunEvent& e = events[i];
    if (e.isGroup || e.owner != o || e.p2p != p2p) continue;
    if (p2p ? e.peer == peer && e.isSend == isSend : e.seq == seq) return e.handle;
  }
  return nullptr;
}

bool wantsDeviceEvents(const CommObserver* o) {
  return o && activeRunScopes > 0 &&
         (o->profilerMask &
          (profiler::kGroup | profiler::kColl | profiler::kP2p | profiler::kKernelLaunch | profiler::kKernelCh));
}

void* startKernelLaunch(CommObserver* o, void* stream) {
  if (!(o->profilerMask & profiler::kKernelLaunch)) return nullptr;
  // A lone call's own group API event, or the open group's when this
  // communicator's plugin context owns it (a parent must be its own event).
  void* parent = loneGroupApiEvent ? loneGroupApiEvent : groupApiOwner == o ? groupApiEvent : nullptr;
  profiler::EventDescr d = descrFor(*o, profiler::kKernelLaunch, parent);
  d.kernelLaunch.stream = stream;
  return profiler::start(o->profilerContext, &d);
}

void stopKernelLaunch(void* launch) { profiler::stop(launch); }

void* startDeviceCall(CommObserver* o, const CollCall& call, uint64_t seq, int nChannels, const char* algo,
                      const char* proto) {
  CommObserver::Planned planned;
  planned.algorithm = algo;
  planned.protocol = proto;
  planned.nchannels = nChannels;
  return startRunEvent(*o, call, planned, seq);
}

struct KernelChannels {
  std::vector<void*> events;
};

KernelChannels* startKernelChannels(CommObserver* o, void* parent, const int* channels, int n,
                                    KernelChannels* pending) {
  if (!(o->profilerMask & profiler::kKernelCh) || !parent) return pending;
  if (!pending) pending = new KernelChannels;
  for (int i = 0; i < n; ++i) {
    profiler::EventDescr d = descrFor(*o, profiler::kKernelCh, parent);
    d.kernelCh.channelId = static_cast<uint8_t>(channels[i]);
    d.kernelCh.pTimer = 0;  // unknown: the host reads no GPU timer
    if (void* h = profiler::start(o->profilerContext, &d)) pending->events.push_back(h);
  }
  return pending;
}

void kernelDone(void* pending) {
  auto* k = static_cast<KernelChannels*>(pending);
  if (!k) return;
  for (void* h : k->events) {
    profiler::EventStateArgs args{};
    args.kernelCh.pTimer = 0;
    profiler::recordState(h, profiler::kKernelChStop, &args);
    profiler::stop(h);
  }
  delete k;
}

}  // namespace stepev

void RunScope::begin() {
  ++activeRunScopes;
  firstEvent_ = runFirstEvent;
  runFirstEvent = runEventCount;
}

void RunScope::end() {
  --activeRunScopes;
  const size_t mine = runFirstEvent;
  runFirstEvent = firstEvent_;
  if (runEventCount == mine) return;
  std::vector<RunEvent>& events = runEvents();
  for (size_t i = events.size(); i-- > mine;) profiler::stop(events[i].handle);
  events.resize(mine);
  runEventCount = mine;
}

}  // namespace gyre
