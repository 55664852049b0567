// The status port's protocol, as a client speaks it: the input is what a
// client sends (a request line, then its proof), served by the status
// thread's own code over a socket pair, on the unix socket (local) and the
// TCP port; then the same bytes as a challenge line, a hexadecimal id and a
// key file's text.
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "src/observe/status_auth.h"
#include "src/observe/status_server.h"

using namespace gyre;

namespace {

void serveOver(const std::string& request, bool local) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return;
  // A client's request fits the socket's buffer; the server reads at most a
  // line of 200 bytes and its answers are short.
  (void)!write(fds[0], request.data(), request.size());
  shutdown(fds[0], SHUT_WR);
  statusServeClient(fds[1], local);
  close(fds[1]);
  char sink[4096];
  while (read(fds[0], sink, sizeof sink) > 0) {
  }
  close(fds[0]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  serveOver(text, size > 0 && (data[0] & 1));
  statusauth::Challenge c;
  if (statusauth::parseChallenge(text, &c) && statusauth::challengeText(c) != text &&
      statusauth::parseChallenge(statusauth::challengeText(c), &c) == false)
    __builtin_trap();
  uint64_t v = 0;
  if (statusauth::parseHex64(text, &v)) {
    uint64_t back = 0;
    if (!statusauth::parseHex64(statusauth::hex16(v), &back) || back != v) __builtin_trap();
  }
  uint64_t id = 0, secret = 0;
  std::string why;
  if (statusauth::parseKeyFile(text, "fuzz.key", &id, &secret, &why)) {
    uint64_t id2 = 0, secret2 = 0;
    if (!statusauth::parseKeyFile(statusauth::keyFileText(id, secret), "fuzz.key", &id2, &secret2, &why) ||
        id2 != id || secret2 != secret)
      __builtin_trap();
  }
  return 0;
}
