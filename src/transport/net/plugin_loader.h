// External NCCL net plugins: NCCL_NET_PLUGIN=<name> loads
// libnccl-net-<name>.so (or the path given, when it contains a '/') with
// dlopen and uses the newest ncclNet_vN table it exports that gyre supports.
// gyre supports v8, v9 and v10 (net_adapters.h); a plugin that exports only
// older or only newer tables is an error that names the variable, the file,
// the versions gyre looked for and those the plugin exports.
#pragma once

#include <string>

#include "include/gyre.h"
#include "src/transport/net/network.h"

namespace gyre {

// Loads, init()s and counts the devices of the plugin named by `spec`.
ncclResult_t loadNetPlugin(const std::string& spec, Network* out);

// The file of the net plugin this process loaded ("" if none): NCCL looks
// there for a tuner plugin when NCCL_TUNER_PLUGIN names none it can open.
std::string loadedNetPluginFile();

// The last WARN line the plugin `name` logged through gyre's logger ("" if none).
std::string lastPluginWarning(const std::string& name);

}  // namespace gyre
