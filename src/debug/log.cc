#include "src/debug/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "include/gyre.h"
#include "src/config/env.h"

namespace gyre {
namespace {

thread_local int tlsLogRank = -1;

struct LogSink {
  LogLevel level = LogLevel::None;
  FILE* file = stderr;
  char host[64] = "?";
  std::mutex mutex;
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

LogSink& sink() {
  static LogSink* s = [] {
    auto* ls = new LogSink();  // leaked on purpose: logging must work during static destruction
    gethostname(ls->host, sizeof(ls->host) - 1);
    if (char* dot = strchr(ls->host, '.')) *dot = '\0';
    std::string level = env::getString("NCCL_DEBUG");
    if (level == "VERSION") ls->level = LogLevel::Version;
    else if (level == "WARN") ls->level = LogLevel::Warn;
    else if (level == "INFO") ls->level = LogLevel::Info;
    else if (level == "TRACE") ls->level = LogLevel::Trace;
    std::string file = env::getString("NCCL_DEBUG_FILE");
    if (ls->level != LogLevel::None && !file.empty()) {
      std::string name = expandFileName(file.c_str(), ls->host);
      if (FILE* f = fopen(name.c_str(), "a")) {
        setvbuf(f, nullptr, _IOLBF, 0);
        ls->file = f;
      }
    }
    if (ls->level >= LogLevel::Version)
      fprintf(ls->file, "%s:%d:%d NCCL INFO gyre %d.%d.%d (NCCL API %d.%d.%d)\n", ls->host, getpid(),
              static_cast<int>(syscall(SYS_gettid)), GYRE_MAJOR, GYRE_MINOR, GYRE_PATCH, NCCL_MAJOR,
              NCCL_MINOR, NCCL_PATCH);
    return ls;
  }();
  return *s;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Trace: return "TRACE";
    default: return "INFO";
  }
}

}  // namespace

LogLevel logLevel() { return sink().level; }
void setLogRank(int rank) { tlsLogRank = rank; }
int logRank() { return tlsLogRank; }

void logLineV(LogLevel level, const char* subsys, const char* fmt, va_list ap) {
  LogSink& s = sink();
  if (s.level < level) return;
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
