#include "src/transport/ib/verbs_api.h"

#include <dlfcn.h>

#include <mutex>

#include "src/config/env.h"

namespace gyre::ib {
namespace {

template <typename F>
bool load(void* lib, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (!*out && missing) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

}  // namespace

const VerbsApi* verbs(std::string* why) {
  static std::once_flag once;
  static VerbsApi api;
  static bool ok = false;
  static std::string error;
  std::call_once(once, [] {
    std::string name = env::getString("GYRE_IBVERBS_LIB");
    if (name.empty()) name = "libibverbs.so.1";
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = "cannot load " + name + " (" + dlerror() + ")";
      return;
    }
    api.library = name;
    std::string missing;
    load(lib, "ibv_get_device_list", &api.getDeviceList, &missing);
    load(lib, "ibv_free_device_list", &api.freeDeviceList, &missing);
    load(lib, "ibv_get_device_name", &api.getDeviceName, &missing);
    load(lib, "ibv_open_device", &api.openDevice, &missing);
    load(lib, "ibv_close_device", &api.closeDevice, &missing);
    load(lib, "ibv_query_device", &api.queryDevice, &missing);
    load(lib, "ibv_query_port", &api.queryPort, &missing);
    load(lib, "ibv_query_gid", &api.queryGid, &missing);
    load(lib, "_ibv_query_gid_ex", &api.queryGidEx, nullptr);
    load(lib, "ibv_alloc_pd", &api.allocPd, &missing);
    load(lib, "ibv_dealloc_pd", &api.deallocPd, &missing);
    load(lib, "ibv_reg_mr", &api.regMr, &missing);
    load(lib, "ibv_reg_dmabuf_mr", &api.regDmabufMr, nullptr);
    load(lib, "ibv_dereg_mr", &api.deregMr, &missing);
    load(lib, "ibv_create_cq", &api.createCq, &missing);
    load(lib, "ibv_destroy_cq", &api.destroyCq, &missing);
    load(lib, "ibv_create_qp", &api.createQp, &missing);
    load(lib, "ibv_modify_qp", &api.modifyQp, &missing);
    load(lib, "ibv_destroy_qp", &api.destroyQp, &missing);
    load(lib, "ibv_get_async_event", &api.getAsyncEvent, nullptr);
    load(lib, "ibv_ack_async_event", &api.ackAsyncEvent, nullptr);
    if (!missing.empty()) {
      error = name + " lacks " + missing;
      return;
    }
    ok = true;
  });
  if (!ok) {
    if (why) *why = error;
    return nullptr;
  }
  return &api;
}

std::string wcStatusText(int status) {
  // ibv_wc_status values (verbs.h), in order.
  static const char* const kNames[] = {
      "success", "local length error", "local QP operation error", "local EE context operation error",
      "local protection error", "work request flushed", "memory window bind error", "bad response error",
      "local access error", "remote invalid request error", "remote access error", "remote operation error",
      "transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation error",
      "remote invalid RD request", "remote aborted error", "invalid EE context number",
      "invalid EE context state", "fatal error", "response timeout error", "general error"};
  const char* n = status >= 0 && status < static_cast<int>(sizeof(kNames) / sizeof(kNames[0])) ? kNames[status]
                                                                                               : "unknown status";
  return std::string(n) + " (" + std::to_string(status) + ")";
}

std::string asyncEventText(int type) {
  // ibv_event_type values (verbs.h), in order.
  static const char* const kNames[] = {
      "IBV_EVENT_CQ_ERR",         "IBV_EVENT_QP_FATAL",     "IBV_EVENT_QP_REQ_ERR",    "IBV_EVENT_QP_ACCESS_ERR",
      "IBV_EVENT_COMM_EST",       "IBV_EVENT_SQ_DRAINED",   "IBV_EVENT_PATH_MIG",      "IBV_EVENT_PATH_MIG_ERR",
      "IBV_EVENT_DEVICE_FATAL",   "IBV_EVENT_PORT_ACTIVE",  "IBV_EVENT_PORT_ERR",      "IBV_EVENT_LID_CHANGE",
      "IBV_EVENT_PKEY_CHANGE",    "IBV_EVENT_SM_CHANGE",    "IBV_EVENT_SRQ_ERR",       "IBV_EVENT_SRQ_LIMIT_REACHED",
      "IBV_EVENT_QP_LAST_WQE_REACHED", "IBV_EVENT_CLIENT_REREGISTER", "IBV_EVENT_GID_CHANGE", "IBV_EVENT_WQ_FATAL"};
  const char* n = type >= 0 && type < static_cast<int>(sizeof(kNames) / sizeof(kNames[0])) ? kNames[type]
                                                                                           : "unknown event";
  return std::string(n) + " (" + std::to_string(type) + ")";
}

}  // namespace gyre::ib
