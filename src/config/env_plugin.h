// NCCL env plugins: a library (NCCL_ENV_PLUGIN; unset: libnccl-env.so if it
// can be loaded; "none": no plugin) whose getEnv() answers every NCCL_* and
// GYRE_* read in place of the process environment, so a site can set them
// centrally. gyre looks its table up as NCCL does, ncclEnvPlugin_v2, then
// ncclEnvPlugin_v1, and finalizes it at exit.
//
// Opened while the settings snapshot is built (env.cc), before the logger can
// read its own settings: nothing here logs; what happened is returned as
// notes for env.cc to log once logging works.
#pragma once

#include <string>
#include <vector>

namespace gyre::env {

struct EnvPlugin {
  const char* (*getEnv)(const char* name) = nullptr;  // null: no plugin answers
  std::string origin;               // "env plugin NAME (FILE, ncclEnvPlugin_vN)"
  std::vector<std::string> notes;   // INFO lines: what was loaded or why not
  std::vector<std::string> warnings;  // WARN lines: a plugin asked for and not used, its own warnings
};

// Opens the plugin NCCL_ENV_PLUGIN names (read from the process environment,
// as NCCL does) once per process; later calls return the same.
const EnvPlugin& envPlugin();

// The symbols an env plugin's table is looked up by, in the order tried.
std::vector<std::string> envPluginSymbols();

}  // namespace gyre::env
