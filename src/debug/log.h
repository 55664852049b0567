// Logging controlled by NCCL_DEBUG (VERSION, WARN, INFO, TRACE) and
// NCCL_DEBUG_FILE. Every line starts with host:pid:tid [rank] so lines from many
// processes interleaved in one terminal or file can be told apart.
#pragma once

#include <cstdarg>

namespace gyre {

enum class LogLevel : int { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };

// The level chosen by NCCL_DEBUG (read once, again after resetLogSettings).
LogLevel logLevel();

// ncclResetDebugInit: the next log line reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS
// and NCCL_DEBUG_FILE again, from the environment as it is then.
void resetLogSettings();

// Writes one line if `level` is enabled. `subsys` is a short tag ("INIT", "NET", "COLL").
void logLine(LogLevel level, const char* subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
void logLineV(LogLevel level, const char* subsys, const char* fmt, va_list ap);

// The rank printed in the line prefix of lines logged by this thread (-1: none).
// Set by the API entry points for the communicator they work on: inline, on
// a plain __thread int, as every call sets and restores it.
extern __thread int tlsLogRank;
inline void setLogRank(int rank) { tlsLogRank = rank; }
inline int logRank() { return tlsLogRank; }

// Restores the previous log rank at scope exit.
class ScopedLogRank {
 public:
  explicit ScopedLogRank(int rank) : saved_(logRank()) { setLogRank(rank); }
  ~ScopedLogRank() { setLogRank(saved_); }
  ScopedLogRank(const ScopedLogRank&) = delete;
  ScopedLogRank& operator=(const ScopedLogRank&) = delete;

 private:
  int saved_;
};

}  // namespace gyre

#define GYRE_WARN(...) ::gyre::logLine(::gyre::LogLevel::Warn, "", __VA_ARGS__)
#define GYRE_INFO(subsys, ...)                                  \
  do {                                                          \
    if (::gyre::logLevel() >= ::gyre::LogLevel::Info)           \
      ::gyre::logLine(::gyre::LogLevel::Info, subsys, __VA_ARGS__); \
  } while (0)
#define GYRE_TRACE(subsys, ...)                                  \
  do {                                                           \
    if (::gyre::logLevel() >= ::gyre::LogLevel::Trace)           \
      ::gyre::logLine(::gyre::LogLevel::Trace, subsys, __VA_ARGS__); \
  } while (0)
