#include "src/debug/error.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "src/debug/log.h"

namespace gyre {
namespace {

constexpr size_t kMaxText = 1024;
thread_local char tlsText[kMaxText];
char processText[kMaxText];
std::mutex processMutex;

}  // namespace

ncclResult_t fail(ncclResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tlsText, kMaxText, fmt, ap);
  va_end(ap);
  {
    std::lock_guard<std::mutex> lock(processMutex);
    snprintf(processText, kMaxText, "%s", tlsText);
  }
  logLine(LogLevel::Warn, "", "%s", tlsText);
  return code;
}

const char* lastErrorText() {
  if (tlsText[0]) return tlsText;
  std::lock_guard<std::mutex> lock(processMutex);
  return processText;
}

void clearThreadError() { tlsText[0] = '\0'; }

}  // namespace gyre
