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
thread_local bool tlsQuiet = false;
thread_local int tlsTentative = 0;  // open TentativeFailures scopes on this thread

void record(const char* text) {
  if (text != tlsText) snprintf(tlsText, kMaxText, "%s", text);
  std::lock_guard<std::mutex> lock(processMutex);
  snprintf(processText, kMaxText, "%s", tlsText);
}

}  // namespace

ncclResult_t fail(ncclResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tlsText, kMaxText, fmt, ap);
  va_end(ap);
  if (tlsTentative > 0) return code;
  record(tlsText);
  if (!tlsQuiet) logLine(LogLevel::Warn, "", "%s", tlsText);
  return code;
}

ncclResult_t recordFailure(ncclResult_t code, const char* text) {
  record(text);
  return code;
}

ncclResult_t recordThreadFailure(ncclResult_t code, const char* text) {
  size_t n = 0;
  for (; text[n] && n + 1 < kMaxText; ++n) tlsText[n] = text[n];
  tlsText[n] = '\0';
  return code;
}

const char* threadErrorText() { return tlsText; }

QuietFailures::QuietFailures(bool on) : on_(on) {
  if (on_) {
    wasQuiet_ = tlsQuiet;
    tlsQuiet = true;
  }
}

QuietFailures::~QuietFailures() {
  if (on_) tlsQuiet = wasQuiet_;
}

TentativeFailures::TentativeFailures() : saved_(tlsText) { ++tlsTentative; }

TentativeFailures::~TentativeFailures() {
  --tlsTentative;
  if (!kept_) {
    snprintf(tlsText, kMaxText, "%s", saved_.c_str());
    return;
  }
  if (tlsTentative > 0 || !tlsText[0]) return;  // an outer scope decides
  record(tlsText);
  if (!tlsQuiet) logLine(LogLevel::Warn, "", "%s", tlsText);
}

const char* lastErrorText() {
  if (tlsText[0]) return tlsText;
  std::lock_guard<std::mutex> lock(processMutex);
  return processText;
}

void clearThreadError() { tlsText[0] = '\0'; }

}  // namespace gyre
