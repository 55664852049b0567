// libibverbs, loaded with dlopen so gyre runs where rdma-core is absent.
// GYRE_IBVERBS_LIB names another library to load instead (the tests' fake
// provider). Only the exported functions are looked up here: ibv_post_send,
// ibv_post_recv and ibv_poll_cq are inline in verbs.h and call through the
// context's ops table, which is what ibPostSend() and friends do too.
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "include/gyre.h"

namespace gyre::ib {

struct VerbsApi {
  std::string library;  // the file that was loaded
  ibv_device** (*getDeviceList)(int*) = nullptr;
  void (*freeDeviceList)(ibv_device**) = nullptr;
  const char* (*getDeviceName)(ibv_device*) = nullptr;
  ibv_context* (*openDevice)(ibv_device*) = nullptr;
  int (*closeDevice)(ibv_context*) = nullptr;
  int (*queryDevice)(ibv_context*, ibv_device_attr*) = nullptr;
  int (*queryPort)(ibv_context*, uint8_t, ibv_port_attr*) = nullptr;
  int (*queryGid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  // Optional (rdma-core >= 33): the GID's type, to find RoCE v2 entries.
  int (*queryGidEx)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*, uint32_t, size_t) = nullptr;
  ibv_pd* (*allocPd)(ibv_context*) = nullptr;
  int (*deallocPd)(ibv_pd*) = nullptr;
  ibv_mr* (*regMr)(ibv_pd*, void*, size_t, int) = nullptr;
  ibv_mr* (*regDmabufMr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int) = nullptr;  // optional
  int (*deregMr)(ibv_mr*) = nullptr;
  ibv_cq* (*createCq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroyCq)(ibv_cq*) = nullptr;
  ibv_qp* (*createQp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modifyQp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*destroyQp)(ibv_qp*) = nullptr;
  // Asynchronous events (ib_async.h); optional: without them no event thread runs.
  int (*getAsyncEvent)(ibv_context*, ibv_async_event*) = nullptr;
  void (*ackAsyncEvent)(ibv_async_event*) = nullptr;
};

// Loads the library once per process. Null with *why set when it is absent
// or lacks a required function.
const VerbsApi* verbs(std::string* why);

// The inline verbs calls, through the provider's ops table.
inline int ibPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  return qp->context->ops.post_send(qp, wr, bad);
}
inline int ibPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return qp->context->ops.post_recv(qp, wr, bad);
}
inline int ibPollCq(ibv_cq* cq, int n, ibv_wc* wc) { return cq->context->ops.poll_cq(cq, n, wc); }

// "remote access error (10)": the names of ibv_wc_status values.
std::string wcStatusText(int status);
// "IBV_EVENT_PORT_ERR (10)": the names of ibv_event_type values.
std::string asyncEventText(int type);

}  // namespace gyre::ib
