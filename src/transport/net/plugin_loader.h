// External NCCL net plugins: NCCL_NET_PLUGIN=<name> loads <name> or else
// libnccl-net-<name>.so (a path or a lib*.so name is taken as given), as
// NCCL does, and uses the newest table it exports under NCCL's symbol
// names, ncclNetPlugin_v12 down to ncclNetPlugin_v8 (net_adapters.h). A
// plugin that exports only older or only newer tables is an error that
// names the variable, the file, the symbols gyre looked for and those the
// plugin exports.
#pragma once

#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/transport/net/network.h"

namespace gyre {

// Loads, init()s and counts the devices of the plugin named by `spec`.
ncclResult_t loadNetPlugin(const std::string& spec, Network* out);

// With NCCL_NET_PLUGIN unset: loads libnccl-net.so if the library path has
// it and it works; false (with an INFO line saying why) otherwise.
bool loadDefaultNetPlugin(Network* out);

// The symbols a net plugin's table is looked up by, in the order tried.
std::vector<std::string> netPluginSymbols();

// The file of the net plugin this process loaded ("" if none): NCCL looks
// there for a tuner plugin when NCCL_TUNER_PLUGIN names none it can open.
std::string loadedNetPluginFile();

// The last WARN line the plugin `name` logged through gyre's logger ("" if none).
std::string lastPluginWarning(const std::string& name);

}  // namespace gyre
