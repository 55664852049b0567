#include "src/debug/fork_guard.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

#include "src/debug/error.h"

namespace gyre {
namespace {

std::atomic<int> g_hazards{0};
// Set by the child's fork handler; the parent's pid then, for the message.
std::atomic<bool> g_forkedChild{false};
std::atomic<int> g_parentPid{0};

// Runs in the child right after fork(), so it may only do async-signal-safe
// things: it reads an atomic the fork copied and sets two others.
void onForkChild() {
  if (g_hazards.load(std::memory_order_relaxed) > 0 && !g_forkedChild.load(std::memory_order_relaxed)) {
    g_parentPid.store(static_cast<int>(getppid()), std::memory_order_relaxed);
    g_forkedChild.store(true, std::memory_order_relaxed);
  }
}

void registerForkHandler() {
  static const bool registered = pthread_atfork(nullptr, nullptr, onForkChild) == 0;
  (void)registered;
}

// Appends `text` to buf[*len..cap-1], keeping it terminated; no library call.
void append(char* buf, size_t cap, size_t* len, const char* text) {
  while (*text && *len + 1 < cap) buf[(*len)++] = *text++;
  buf[*len] = '\0';
}

void appendInt(char* buf, size_t cap, size_t* len, int value) {
  char digits[16];
  int n = 0;
  unsigned v = value < 0 ? 0u : static_cast<unsigned>(value);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v && n < 15);
  char text[16];
  for (int i = 0; i < n; ++i) text[i] = digits[n - 1 - i];
  text[n] = '\0';
  append(buf, cap, len, text);
}

}  // namespace

ForkHazard::ForkHazard() {
  registerForkHandler();
  g_hazards.fetch_add(1, std::memory_order_relaxed);
}

ForkHazard::~ForkHazard() {
  if (held_) g_hazards.fetch_sub(1, std::memory_order_relaxed);
}

ForkHazard::ForkHazard(ForkHazard&& other) noexcept : held_(other.held_) { other.held_ = false; }

bool inForkedChild() { return g_forkedChild.load(std::memory_order_relaxed); }

ncclResult_t checkNotForkedChild(const char* caller) {
  if (__builtin_expect(!inForkedChild(), 1)) return ncclSuccess;
  char text[512];
  size_t len = 0;
  text[0] = '\0';
  append(text, sizeof text, &len, caller);
  append(text, sizeof text, &len, ": this process was forked from process ");
  appendInt(text, sizeof text, &len, g_parentPid.load(std::memory_order_relaxed));
  append(text, sizeof text, &len,
         " while gyre had live communicators or threads there; a child of such a fork may not use gyre "
         "(POSIX allows it only async-signal-safe calls until exec). Fork before the first gyre call that "
         "starts a thread (ncclGetUniqueId, communicator init) and make the unique id after forking, or "
         "start the workers with exec (Python multiprocessing: the spawn or forkserver start method)");
  return recordThreadFailure(ncclInvalidUsage, text);
}

}  // namespace gyre
