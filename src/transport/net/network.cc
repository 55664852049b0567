#include "src/transport/net/network.h"

#include <strings.h>

#include <mutex>
#include <vector>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/transport/ib/ib_net.h"
#include "src/transport/net/net_transport.h"
#include "src/transport/net/plugin_loader.h"
#include "src/transport/socket/socket_transport.h"

namespace gyre {
namespace {

struct Choice {
  bool done = false;
  ncclResult_t result = ncclSuccess;
  std::string error;
  Network plugin;  // api null when no plugin is loaded
  Network ib;      // api null when no usable HCA
  std::string ibWhyNot;
  Network socket{"Socket", nullptr, 1, false};
  const Network* chosen = nullptr;
};

Choice& choice() {
  static Choice c;
  return c;
}

ncclResult_t choose(Choice* c) {
  const std::string pluginSpec = env::getString("NCCL_NET_PLUGIN");
  if (pluginSpec.empty()) {
    // As NCCL: unset, libnccl-net.so is used if it can be loaded (how many
    // clusters install their plugin); if not, the built-in networks are.
    Network found;
    if (loadDefaultNetPlugin(&found)) c->plugin = found;
  } else if (strcasecmp(pluginSpec.c_str(), "none") != 0) {
    GYRE_CHECK(loadNetPlugin(pluginSpec, &c->plugin));
  }
  GYRE_CHECK(probeIbNetwork(&c->ib, &c->ibWhyNot));

  std::vector<const Network*> available;
  if (c->plugin.api) available.push_back(&c->plugin);
  if (c->ib.api) available.push_back(&c->ib);
  available.push_back(&c->socket);

  const std::string forced = env::getString("NCCL_NET");
  if (forced.empty()) {
    c->chosen = available.front();
  } else {
    for (const Network* n : available)
      if (strcasecmp(n->name.c_str(), forced.c_str()) == 0) c->chosen = n;
    if (!c->chosen) {
      std::string names;
      for (const Network* n : available) names += (names.empty() ? "" : ", ") + n->name;
      std::string extra;
      if (strcasecmp(forced.c_str(), "IB") == 0) extra = " (IB is not usable: " + c->ibWhyNot + ")";
      return fail(ncclInvalidArgument, "NCCL_NET=%s: no such network; the networks that exist here are %s%s",
                  forced.c_str(), names.c_str(), extra.c_str());
    }
  }
  if (!c->ib.api) GYRE_INFO("NET", "IB network not used: %s", c->ibWhyNot.c_str());
  GYRE_INFO("NET", "using network %s (%d devices)", c->chosen->name.c_str(), c->chosen->devices);
  return ncclSuccess;
}

}  // namespace

ncclResult_t selectNetwork(const Network** out) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  Choice& c = choice();
  if (!c.done) {
    c.result = choose(&c);
    if (c.result != ncclSuccess) c.error = lastErrorText();
    c.done = true;
  }
  if (c.result != ncclSuccess) return fail(c.result, "%s", c.error.c_str());
  if (out) *out = c.chosen;
  return ncclSuccess;
}

Transport* networkTransport() {
  const Network* n = nullptr;
  if (selectNetwork(&n) != ncclSuccess || !n->api) return socketTransport();
  return netTransportFor(n);
}

}  // namespace gyre
