// NCCL profiler plugins: NCCL_PROFILER_PLUGIN names a library (a path, or
// NAME for libnccl-profiler-NAME.so, or the file name as given); unset,
// gyre tries NCCL's default libnccl-profiler.so quietly; "none" loads
// nothing. The newest interface gyre drives (ncclProfiler_v6, then
// ncclProfiler_v5) is used. A plugin that is missing, exports no version
// gyre knows, or whose init fails for a communicator is warned about,
// naming it, and the job runs on without it.
#pragma once

#include <string>
#include <vector>

#include "src/observe/profiler_v5.h"

namespace gyre::profiler {

// The loaded plugin's table, or null. Loads on first call.
const PluginV5* plugin();

// The symbols a profiler plugin's table is looked up by, in the order tried.
std::vector<std::string> pluginSymbols();

// Per communicator: false when there is no plugin or its init failed
// (warned). *context: the plugin's (it may leave it null); *mask: the event
// types it asked for. finalizeForComm only after a true initForComm.
bool initForComm(uint64_t commId, int nNodes, int nranks, int rank, void** context, int* mask);
void finalizeForComm(void* context);

// Starts an event; null when the plugin keeps none for it.
void* start(void* context, EventDescr* descr);
void stop(void* handle);
void recordState(void* handle, EventState state, EventStateArgs* args = nullptr);

// NCCL's datatype names ("ncclFloat32", ...) and function names ("AllReduce", "Send", ...).
const char* datatypeName(ncclDataType_t type);

}  // namespace gyre::profiler
