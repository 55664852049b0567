// Recording failures: the first place that knows the facts calls fail(), which
// keeps the text for ncclGetLastError and logs it at WARN. Callers above just
// propagate the ncclResult_t.
#pragma once

#include "include/gyre.h"

namespace gyre {

// Records a formatted message as the last error and returns `code`.
ncclResult_t fail(ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// The last recorded error text for this thread, else for the process ("" if none).
const char* lastErrorText();

// Forgets this thread's last error (used at the start of API calls that succeed
// after an earlier failure, so stale text is not mistaken for a new error).
void clearThreadError();

}  // namespace gyre

#define GYRE_CHECK(call)                          \
  do {                                            \
    ncclResult_t gyre_res_ = (call);              \
    if (gyre_res_ != ncclSuccess) return gyre_res_; \
  } while (0)
