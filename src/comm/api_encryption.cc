// gyre's extension for keyed encryption of its socket connections
// (src/bootstrap/secure/protection.h has the rules).
#include "include/gyre.h"
#include "src/bootstrap/secure/protection.h"
#include "src/comm/api_export.h"
#include "src/debug/error.h"

using namespace gyre;

GYRE_EXPORT ncclResult_t gyreSetEncryptionKey(const void* key, size_t bytes) {
  clearThreadError();
  return setUserKey(key, bytes);
}
