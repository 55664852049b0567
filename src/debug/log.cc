#include "src/debug/log.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <strings.h>
#include <vector>

#include "include/gyre.h"
#include "src/config/env.h"

namespace gyre {

__thread int tlsLogRank = -1;
namespace {

struct LogSink {
  LogLevel level = LogLevel::None;
  // NCCL_DEBUG_SUBSYS: which subsystems' INFO/TRACE lines show (NCCL's syntax:
  // a comma list, ^ to exclude, ALL by default). WARN lines always show.
  std::vector<std::string> subsystems;
  bool excludeSubsystems = false;
  FILE* file = stderr;
  char host[64] = "?";
  std::mutex mutex;
  // The sink this one replaced (ncclResetDebugInit): kept, and reachable, for
  // threads that may still be writing through it.
  LogSink* replaced = nullptr;
};

// NCCL_DEBUG_FILE accepts %h (host) and %p (pid) so each process can write its own file.
std::string expandFileName(const char* pattern, const char* host) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      out += host;
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      out += std::to_string(getpid());
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

// Where the code of this library was loaded from (libnccl.so.2 or
// libgyre.so), so the banner answers "which library did this process load?".
std::string loadedFrom() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&loadedFrom), &info) && info.dli_fname) return info.dli_fname;
  return "?";
}

// The debug settings: from the settings snapshot at first use; after
// ncclResetDebugInit, from the environment as it is then (the point of that
// call: a program may have set or unset them), else nccl.conf, else the default.
std::string debugSetting(const char* name, bool reread) {
  if (!reread) return env::getString(name);
  if (const char* value = getenv(name)) return value;
  env::Setting s = env::lookup(name);
  if (s.source == env::Source::File) return s.value;
  const env::VarSpec* spec = env::find(name);
  return spec ? spec->defaultValue : "";
}

LogSink* makeSink(bool reread) {
  auto* ls = new LogSink();
  gethostname(ls->host, sizeof(ls->host) - 1);
  if (char* dot = strchr(ls->host, '.')) *dot = '\0';
  std::string level = debugSetting("NCCL_DEBUG", reread);
  if (level == "VERSION") ls->level = LogLevel::Version;
  else if (level == "WARN") ls->level = LogLevel::Warn;
  else if (level == "INFO") ls->level = LogLevel::Info;
  else if (level == "TRACE") ls->level = LogLevel::Trace;
  std::string subsys = debugSetting("NCCL_DEBUG_SUBSYS", reread);
  if (!subsys.empty() && subsys[0] == '^') {
    ls->excludeSubsystems = true;
    subsys.erase(0, 1);
  }
  for (size_t pos = 0; pos <= subsys.size();) {
    size_t comma = subsys.find(',', pos);
    std::string item = subsys.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) ls->subsystems.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::string file = debugSetting("NCCL_DEBUG_FILE", reread);
  if (ls->level != LogLevel::None && !file.empty()) {
    std::string name = expandFileName(file.c_str(), ls->host);
    if (FILE* f = fopen(name.c_str(), "a")) {
      setvbuf(f, nullptr, _IOLBF, 0);
      ls->file = f;
    }
  }
  // The banner: NCCL prints "NCCL version X" here; gyre says that it is gyre,
  // its own release, the NCCL API level it implements, and the file loaded.
  if (ls->level >= LogLevel::Version)
    fprintf(ls->file, "%s:%d:%d NCCL INFO gyre %d.%d.%d (NCCL API %d.%d.%d) loaded from %s\n", ls->host, getpid(),
            static_cast<int>(syscall(SYS_gettid)), GYRE_MAJOR, GYRE_MINOR, GYRE_PATCH, NCCL_MAJOR, NCCL_MINOR,
            NCCL_PATCH, loadedFrom().c_str());
  return ls;
}

// Sinks are replaced only by ncclResetDebugInit; old ones are never freed,
// since other threads may be writing through them, and logging must work
// during static destruction. Each new sink links the one it replaced, so
// they stay reachable (not leaks to a leak checker).
std::atomic<LogSink*> g_sink{nullptr};
LogSink* g_retired = nullptr;  // the last sink resetLogSettings retired; g_sinkMutex
std::atomic<bool> g_reread{false};
std::mutex g_sinkMutex;

LogSink& sink() {
  if (LogSink* s = g_sink.load(std::memory_order_acquire)) return *s;
  std::lock_guard<std::mutex> lock(g_sinkMutex);
  if (LogSink* s = g_sink.load(std::memory_order_acquire)) return *s;
  LogSink* s = makeSink(g_reread.load());
  s->replaced = g_retired;
  g_retired = nullptr;
  g_sink.store(s, std::memory_order_release);
  return *s;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Trace: return "TRACE";
    default: return "INFO";
  }
}

bool subsystemShown(const LogSink& s, const char* subsys) {
  if (s.subsystems.empty() || !*subsys) return true;
  bool listed = false;
  for (const std::string& item : s.subsystems)
    listed |= strcasecmp(item.c_str(), subsys) == 0 || strcasecmp(item.c_str(), "ALL") == 0;
  return listed != s.excludeSubsystems;
}

}  // namespace

LogLevel logLevel() { return sink().level; }
void resetLogSettings() {
  std::lock_guard<std::mutex> lock(g_sinkMutex);
  g_reread.store(true);
  // A sink made since the last reset holds the older ones in its chain.
  if (LogSink* old = g_sink.exchange(nullptr, std::memory_order_acq_rel)) g_retired = old;
}

void logLineV(LogLevel level, const char* subsys, const char* fmt, va_list ap) {
  LogSink& s = sink();
  if (s.level < level) return;
  if (level > LogLevel::Warn && !subsystemShown(s, subsys)) return;
  char body[1024];
  vsnprintf(body, sizeof(body), fmt, ap);
  char rank[16] = "-";
  if (tlsLogRank >= 0) snprintf(rank, sizeof(rank), "%d", tlsLogRank);
  std::lock_guard<std::mutex> lock(s.mutex);
  fprintf(s.file, "%s:%d:%d [%s] NCCL %s %s%s%s\n", s.host, getpid(), static_cast<int>(syscall(SYS_gettid)),
          rank, levelName(level), subsys, *subsys ? " " : "", body);
}

void logLine(LogLevel level, const char* subsys, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  logLineV(level, subsys, fmt, ap);
  va_end(ap);
}

}  // namespace gyre
