// Unique ids and addresses: the 128 bytes of an ncclUniqueId that a program
// hands every rank (decodeUniqueId, and the address inside it printed), then
// the rest of the input as NCCL_COMM_ID's "host:port" text. Host names are
// the C library's to resolve, not gyre's: this program's getaddrinfo (which
// takes the place of the sanitizer's) accepts numeric hosts only, so a run
// never waits on DNS while all of gyre's own parsing runs.
#include <netdb.h>

#include <string>

#include "src/bootstrap/unique_id.h"
#include "tests/fuzz/fuzz_input.h"

using namespace gyre;

extern "C" int __interceptor_getaddrinfo(const char* node, const char* service, const addrinfo* hints,
                                         addrinfo** res);

extern "C" int getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** res) {
  addrinfo numeric = hints ? *hints : addrinfo{};
  numeric.ai_flags |= AI_NUMERICHOST;
  return __interceptor_getaddrinfo(node, service, &numeric, res);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const ncclUniqueId id = in.take<ncclUniqueId>();
  UniqueIdContents c;
  if (decodeUniqueId(id, &c) == ncclSuccess) {
    (void)c.root.toString();
    ncclUniqueId again;
    encodeUniqueId(c, &again);
    UniqueIdContents back;
    if (decodeUniqueId(again, &back) != ncclSuccess || back.secret != c.secret) __builtin_trap();
  }
  NetAddress addr;
  std::string why;
  if (NetAddress::parse(in.rest(), &addr, &why)) (void)addr.toString();
  return 0;
}
