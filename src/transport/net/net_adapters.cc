#include "src/transport/net/net_adapters.h"

#include <cstring>

namespace gyre {
namespace {

// gyre posts one buffer per irecv (maxRecvs of its own networks is 1); a
// plugin may group more, and this bounds the sizes converted per call.
constexpr int kMaxGroupedRecvs = 8;

// v9 and later keep v8's members under the same names.
template <typename Props>
void propsToV8(const Props& p, gyreNetProperties_v8_t* out) {
  memset(out, 0, sizeof(*out));
  out->name = p.name;
  out->pciPath = p.pciPath;
  out->guid = p.guid;
  out->ptrSupport = p.ptrSupport;
  out->regIsGlobal = p.regIsGlobal;
  out->speed = p.speed;
  out->port = p.port;
  out->latency = p.latency;
  out->maxComms = p.maxComms;
  out->maxRecvs = p.maxRecvs;
  out->netDeviceType = p.netDeviceType;
  out->netDeviceVersion = p.netDeviceVersion;
}

// Copies the members whose signature is the same in v8 to v12.
template <typename Plugin>
void copyUnchanged(const Plugin* p, gyreNet_v8_t* t) {
  t->name = p->name;
  t->devices = p->devices;
  t->accept = p->accept;
  t->regMr = p->regMr;
  t->regMrDmaBuf = p->regMrDmaBuf;
  t->deregMr = p->deregMr;
  t->iflush = p->iflush;
  t->test = p->test;
  t->closeSend = p->closeSend;
  t->closeRecv = p->closeRecv;
  t->closeListen = p->closeListen;
  t->getDeviceMr = p->getDeviceMr;
  t->irecvConsumed = p->irecvConsumed;
}

ncclResult_t widenSizes(int n, const int* sizes, size_t* out) {
  if (n < 0 || n > kMaxGroupedRecvs) return ncclInternalError;
  for (int i = 0; i < n; ++i) out[i] = static_cast<size_t>(sizes[i]);
  return ncclSuccess;
}

// The largest message a version-9-or-later plugin takes on `dev` (0: no limit).
template <typename Plugin, typename Props>
size_t maxP2pOf(const Plugin* plugin, int dev) {
  Props p{};
  if (!plugin || !plugin->getProperties || plugin->getProperties(dev, &p) != ncclSuccess) return 0;
  return p.maxP2pBytes;
}

size_t (*gMaxP2p)(int dev) = nullptr;

// ---- v9 ----

const gyreNet_v9_t* gV9 = nullptr;
gyreNet_v8_t gV9AsV8{};

ncclResult_t v9Properties(int dev, gyreNetProperties_v8_t* props) {
  gyreNetProperties_v9_t p{};
  ncclResult_t r = gV9->getProperties(dev, &p);
  if (r == ncclSuccess) propsToV8(p, props);
  return r;
}

ncclResult_t v9Isend(void* comm, void* data, int size, int tag, void* mh, void** req) {
  return gV9->isend(comm, data, static_cast<size_t>(size), tag, mh, req);
}

ncclResult_t v9Irecv(void* comm, int n, void** data, int* sizes, int* tags, void** mhs, void** req) {
  size_t wide[kMaxGroupedRecvs];
  if (widenSizes(n, sizes, wide) != ncclSuccess) return ncclInternalError;
  return gV9->irecv(comm, n, data, wide, tags, mhs, req);
}

// ---- v10 ----

const gyreNet_v10_t* gV10 = nullptr;
gyreNet_v8_t gV10AsV8{};

// gyre has no profiler plugin: network events are accepted and dropped.
ncclResult_t noProfiler(void** eHandle, int, void*, int64_t, void*) {
  if (eHandle) *eHandle = nullptr;
  return ncclSuccess;
}

ncclResult_t v10Init(gyreNetLogger_t log) { return gV10->init(log, noProfiler); }

ncclResult_t v10Properties(int dev, gyreNetProperties_v8_t* props) {
  gyreNetProperties_v10_t p{};
  ncclResult_t r = gV10->getProperties(dev, &p);
  if (r == ncclSuccess) propsToV8(p, props);
  return r;
}

ncclResult_t v10Connect(int dev, void* handle, void** sendComm, gyreNetDeviceHandle_v8_t** devComm) {
  // The plugin may keep the pointer until the connection is made (connect is
  // called again until then), so the configuration is static.
  static gyreNetCommConfig_v10_t config{GYRE_NET_TRAFFIC_CLASS_UNDEF};
  return gV10->connect(dev, &config, handle, sendComm, devComm);
}

ncclResult_t v10Isend(void* comm, void* data, int size, int tag, void* mh, void** req) {
  return gV10->isend(comm, data, static_cast<size_t>(size), tag, mh, nullptr, req);
}

ncclResult_t v10Irecv(void* comm, int n, void** data, int* sizes, int* tags, void** mhs, void** req) {
  size_t wide[kMaxGroupedRecvs];
  void* profilerHandles[kMaxGroupedRecvs] = {};
  if (widenSizes(n, sizes, wide) != ncclSuccess) return ncclInternalError;
  return gV10->irecv(comm, n, data, wide, tags, mhs, profilerHandles, req);
}

// ---- v11 and v12: one context per process, made by init() ----

template <typename Plugin, typename Props>
struct V11 {
  static inline const Plugin* plugin = nullptr;
  static inline void* ctx = nullptr;
  static inline gyreNet_v8_t view{};

  static ncclResult_t init(gyreNetLogger_t log) {
    // gyre initializes a plugin once per process, not per communicator: the
    // context is the process's, and 0 stands for the communicator id.
    static gyreNetCommConfig_v11_t config{GYRE_NET_TRAFFIC_CLASS_UNDEF};
    return plugin->init(&ctx, 0, &config, log, noProfiler);
  }
  static ncclResult_t properties(int dev, gyreNetProperties_v8_t* props) {
    Props p{};
    ncclResult_t r = plugin->getProperties(dev, &p);
    if (r == ncclSuccess) propsToV8(p, props);
    return r;
  }
  static ncclResult_t listen(int dev, void* handle, void** listenComm) {
    return plugin->listen(ctx, dev, handle, listenComm);
  }
  static ncclResult_t connect(int dev, void* handle, void** sendComm, gyreNetDeviceHandle_v8_t** devComm) {
    return plugin->connect(ctx, dev, handle, sendComm, devComm);
  }
  static ncclResult_t isend(void* comm, void* data, int size, int tag, void* mh, void** req) {
    return plugin->isend(comm, data, static_cast<size_t>(size), tag, mh, nullptr, req);
  }
  static ncclResult_t irecv(void* comm, int n, void** data, int* sizes, int* tags, void** mhs, void** req) {
    size_t wide[kMaxGroupedRecvs];
    void* profilerHandles[kMaxGroupedRecvs] = {};
    if (widenSizes(n, sizes, wide) != ncclSuccess) return ncclInternalError;
    return plugin->irecv(comm, n, data, wide, tags, mhs, profilerHandles, req);
  }
  static size_t maxP2p(int dev) { return maxP2pOf<Plugin, Props>(plugin, dev); }

  static const gyreNet_v8_t* adapt(const Plugin* p) {
    plugin = p;
    copyUnchanged(p, &view);
    view.init = p->init ? init : nullptr;
    view.getProperties = p->getProperties ? properties : nullptr;
    view.listen = p->listen ? listen : nullptr;
    view.connect = p->connect ? connect : nullptr;
    view.isend = p->isend ? isend : nullptr;
    view.irecv = p->irecv ? irecv : nullptr;
    gMaxP2p = maxP2p;
    return &view;
  }
};

}  // namespace

size_t adaptedMaxP2pBytes(int dev) { return gMaxP2p ? gMaxP2p(dev) : 0; }

const gyreNet_v8_t* adaptNetV11(const gyreNet_v11_t* plugin) {
  return V11<gyreNet_v11_t, gyreNetProperties_v11_t>::adapt(plugin);
}

const gyreNet_v8_t* adaptNetV12(const gyreNet_v12_t* plugin) {
  return V11<gyreNet_v12_t, gyreNetProperties_v12_t>::adapt(plugin);
}

const gyreNet_v8_t* adaptNetV9(const gyreNet_v9_t* plugin) {
  gV9 = plugin;
  copyUnchanged(plugin, &gV9AsV8);
  gV9AsV8.listen = plugin->listen;
  gV9AsV8.init = plugin->init;
  gV9AsV8.getProperties = plugin->getProperties ? v9Properties : nullptr;
  gV9AsV8.connect = plugin->connect;
  gV9AsV8.isend = plugin->isend ? v9Isend : nullptr;
  gV9AsV8.irecv = plugin->irecv ? v9Irecv : nullptr;
  gMaxP2p = [](int dev) { return maxP2pOf<gyreNet_v9_t, gyreNetProperties_v9_t>(gV9, dev); };
  return &gV9AsV8;
}

const gyreNet_v8_t* adaptNetV10(const gyreNet_v10_t* plugin) {
  gV10 = plugin;
  copyUnchanged(plugin, &gV10AsV8);
  gV10AsV8.listen = plugin->listen;
  gV10AsV8.init = plugin->init ? v10Init : nullptr;
  gV10AsV8.getProperties = plugin->getProperties ? v10Properties : nullptr;
  gV10AsV8.connect = plugin->connect ? v10Connect : nullptr;
  gV10AsV8.isend = plugin->isend ? v10Isend : nullptr;
  gV10AsV8.irecv = plugin->irecv ? v10Irecv : nullptr;
  gMaxP2p = [](int dev) { return maxP2pOf<gyreNet_v10_t, gyreNetProperties_v10_t>(gV10, dev); };
  return &gV10AsV8;
}

}  // namespace gyre
