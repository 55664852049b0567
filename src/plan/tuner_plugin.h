// NCCL tuner plugins: NCCL_TUNER_PLUGIN names a library as NCCL reads it (the
// name as given, then libnccl-tuner-NAME.so; a path as is); unset, gyre tries
// libnccl-tuner.so quietly; "none" loads nothing. A library that cannot be
// opened falls back, as in NCCL, to the net plugin's library (NCCL_NET_PLUGIN)
// when that exports a tuner. The newest interface the library exports
// (ncclTunerPlugin_v6 down to _v2, tuner_abi.h) is used.
//
// Every communicator opens its own session (the plugin's init with its ranks
// and hosts) and closes it when it is destroyed or aborted; communicators made
// by split, shrink or grow open theirs. The planner consults the session per
// call (tuner_steer.h). A library that is missing, exports no version gyre
// drives, or whose init fails is one WARN line naming it and why, and gyre
// then plans as without it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "src/plan/tuner_abi.h"

namespace gyre {

// An opened tuner library (kept open for the process's life, as plugins expect).
struct TunerLibrary {
  std::string file;   // as dlopen'ed
  std::string name;   // the plugin's own name
  int version = 0;    // kOldestVersion..kNewestVersion
  const void* table = nullptr;  // tuner::TunerV<version>
};

// The symbols a tuner plugin's table is looked up by, in the order tried
// (NCCL's ncclTunerPlugin_vN, newest first).
std::vector<std::string> tunerPluginSymbols();

// Opens the library `spec` names by NCCL_TUNER_PLUGIN's rules ("" as unset).
// Null when there is none to use, after the WARN (a library asked for) or
// INFO (the default) line saying why.
std::unique_ptr<TunerLibrary> loadTunerLibrary(const std::string& spec);

// The process's library, from NCCL_TUNER_PLUGIN, loaded on first use; null
// when there is none.
const TunerLibrary* processTunerLibrary();

// One communicator's plugin context.
class TunerSession {
 public:
  struct Facts {
    uint64_t commId = 0;
    int rank = 0;
    int nranks = 1;
    int nnodes = 1;
    int minRanksPerNode = 1;
    int maxRanksPerNode = 1;
  };
  // Runs the plugin's init; null (after one WARN line) when it fails.
  static std::unique_ptr<TunerSession> open(const TunerLibrary& lib, const Facts& facts);
  ~TunerSession();  // the plugin's destroy (v2..v4) or finalize (v5, v6)
  TunerSession(const TunerSession&) = delete;
  TunerSession& operator=(const TunerSession&) = delete;

  // getCollInfo for one call: the plugin edits `table` and sets *nChannels
  // (0: no opinion). False when it did not return ncclSuccess (logged once).
  bool collInfo(tuner::Func func, size_t bytes, int numPipeOps, tuner::CostCells& table, int* nChannels) const;
  // getChunkSize (v6, when the plugin has one): false when there is none or it failed.
  bool chunkSize(tuner::Func func, size_t bytes, int algo, int proto, int nChannels, size_t* chunk) const;
  // Logs `text` at INFO (TUNING) the first time this session sees `key`.
  void noteOnce(const std::string& key, const std::string& text) const;

  const TunerLibrary& library() const { return lib_; }
  const std::string& label() const { return label_; }  // "NAME (FILE, vN)"

 private:
  TunerSession(const TunerLibrary& lib, const Facts& facts, void* context);
  const TunerLibrary& lib_;
  Facts facts_;
  void* context_ = nullptr;
  std::string label_;
  mutable std::mutex mu_;  // the plugin's context is driven by one caller at a time
  mutable std::set<std::string> noted_;
};

}  // namespace gyre
