#include "src/observe/status_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "src/config/env.h"
#include "src/debug/fork_guard.h"
#include "src/debug/log.h"
#include "src/observe/clock.h"
#include "src/observe/observer.h"
#include "src/observe/status_auth.h"

namespace gyre {
namespace {

constexpr int kRequestWaitMs = 500;  // a client that says nothing is dropped after this

struct Server {
  std::mutex lifecycle;  // the start and stop of the thread (taken before mu)
  std::mutex mu;         // guards comms; the thread takes it to answer
  std::vector<CommObserver*> comms;
  int listenFd = -1;
  int tcpFd = -1;             // GYRE_STATUS_ADDR's listener, or -1
  std::string tcpAddress;     // as bound, "host:port"
  int wakeFds[2] = {-1, -1};  // a byte on [1] stops the thread
  std::string path;
  std::thread thread;
};

Server& server() {
  static Server* s = new Server;  // never destroyed: communicators may outlive static destruction
  return *s;
}

std::string liveState(const CommObserver& o) {
  const uint8_t f = o.liveFunc.load(std::memory_order_relaxed);
  if (f == 0) return "idle";
  if (f == kLiveGroupEnd) return "ncclGroupEnd";
  return apiFuncName(static_cast<ApiFunc>(f - 1));
}

// Every communicator's lines, or (`only`) those of communicators whose id is *only.
std::string answer(const uint64_t* only = nullptr) {
  Server& s = server();
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  const double perTick = secondsPerTick();
  const uint64_t now = readTicks();
  std::string out;
  std::lock_guard<std::mutex> lock(s.mu);
  for (const CommObserver* o : s.comms) {
    if (only && o->commId != *only) continue;
    const uint64_t since = o->liveSince.load(std::memory_order_relaxed);
    const bool busy = o->liveFunc.load(std::memory_order_relaxed) != 0;
    const double ms = busy && now > since ? static_cast<double>(now - since) * perTick * 1e3 : 0;
    char line[400];
    snprintf(line, sizeof line, "comm %016llx rank %d nranks %d pid %d host %s state %s seq %llu for_ms %.0f",
             static_cast<unsigned long long>(o->commId), o->rank, o->nranks, static_cast<int>(getpid()), host,
             liveState(*o).c_str(), static_cast<unsigned long long>(o->liveSeq.load(std::memory_order_relaxed)), ms);
    out += line;
    // The ranks' processes, so the tool can name one that does not answer.
    out += " peers";
    for (size_t r = 0; r < o->peerPids.size(); ++r) {
      out += r ? ',' : ' ';
      out += std::to_string(o->peerPids[r]);
      out += '@';
      out += o->peerHosts[r];
    }
    out += "\n";
    char prefix[64];
    snprintf(prefix, sizeof prefix, "counters %016llx rank %d ", static_cast<unsigned long long>(o->commId), o->rank);
    for (const std::string& c : describeCounters(snapshotOf(o->counters))) {
      out += prefix;
      out += c;
      out += '\n';
    }
  }
  return out + "end\n";
}

using Clock = std::chrono::steady_clock;

int msLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Never waits past the deadline: a client that does not read its answer
// cannot hold the thread (and other clients) up.
void writeAll(int fd, const std::string& text, Clock::time_point deadline) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, msLeft(deadline)) <= 0) return;
      continue;
    }
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Reads one line (without its newline) of at most 200 bytes by the deadline.
bool readLine(int fd, std::string* pending, std::string* line, Clock::time_point deadline) {
  for (;;) {
    const size_t eol = pending->find('\n');
    if (eol != std::string::npos) {
      *line = pending->substr(0, eol);
      pending->erase(0, eol + 1);
      return true;
    }
    if (pending->size() > 200) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, msLeft(deadline)) <= 0) return false;
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    pending->append(buf, static_cast<size_t>(n));
  }
}

// A query authenticated by a communicator's secret (status_auth.h): the
// challenge, the proof, and the communicator's lines or a refusal.
void serveWithSecret(int fd, const std::string& idText, std::string* pending, Clock::time_point deadline) {
  uint64_t id = 0;
  if (!statusauth::parseHex64(idText, &id)) {
    writeAll(fd, "error: '" + idText.substr(0, 32) + "' is not a communicator id (16 hex digits)\n", deadline);
    return;
  }
  // A challenge is sent whether or not the id is known here, so an
  // unauthenticated client learns nothing about which communicators exist.
  const statusauth::Challenge challenge = statusauth::freshChallenge();
  writeAll(fd, "challenge " + statusauth::challengeText(challenge) + "\n", deadline);
  std::string line;
  uint64_t proof = 0;
  if (!readLine(fd, pending, &line, deadline) || line.rfind("proof ", 0) != 0 ||
      !statusauth::parseHex64(line.substr(6), &proof)) {
    writeAll(fd, "error: expected 'proof <16 hex digits>' after the challenge\n", deadline);
    return;
  }
  bool proven = false;
  {
    Server& s = server();
    std::lock_guard<std::mutex> lock(s.mu);
    for (const CommObserver* o : s.comms)
      proven |= o->commId == id && statusauth::proofOf(o->secret, id, challenge) == proof;
  }
  if (!proven) {
    writeAll(fd, "error: wrong secret for communicator " + statusauth::hex16(id) +
                     ", or no such communicator in this process\n", deadline);
    return;
  }
  writeAll(fd, answer(&id), deadline);
}

// One client: checks who it is and what it asks, answers, closes. `local`:
// on the unix socket, where a client of the job's own user may ask without
// the secret.
void serve(int fd, bool local) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(kRequestWaitMs);
  std::string pending, line;
  const bool got = readLine(fd, &pending, &line, deadline);
  const std::string v2 = std::string(statusauth::kRequest2) + " ";
  if (got && line.rfind(v2, 0) == 0) return serveWithSecret(fd, line.substr(v2.size()), &pending, deadline);
  if (!local) {
    writeAll(fd, std::string("error: expected the request line '") + statusauth::kRequest2 + " <communicator id>'\n",
             deadline);
    return;
  }
  if (!got || line != kStatusRequest) {
    writeAll(fd, std::string("error: expected the request line '") + kStatusRequest + "'\n", deadline);
    return;
  }
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != getuid()) {
    writeAll(fd, "error: only the job's own user may read its status without the communicator's secret\n", deadline);
    return;
  }
  writeAll(fd, answer(), deadline);
}

void run(int listenFd, int tcpFd, int wakeFd) {
  for (;;) {
    pollfd p[3] = {{wakeFd, POLLIN, 0}, {listenFd, POLLIN, 0}, {tcpFd, POLLIN, 0}};
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[0].revents) return;
    for (int i = 1; i < 3; ++i) {
      if (!(p[i].revents & POLLIN)) continue;
      int fd = accept4(p[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      serve(fd, i == 1);
      close(fd);
    }
  }
}

// GYRE_STATUS_ADDR: "PORT" or "HOST:PORT" (HOST numeric, "localhost" or
// "*" for every interface; default 127.0.0.1). Processes of one host share
// the setting: each takes the first free port of PORT..PORT+kPortSpan-1.
constexpr int kPortSpan = 64;

int listenTcp(const std::string& spec, std::string* bound) {
  std::string host = "127.0.0.1", port = spec;
  const size_t colon = spec.rfind(':');
  if (colon != std::string::npos) {
    host = spec.substr(0, colon);
    port = spec.substr(colon + 1);
  }
  if (host == "localhost") host = "127.0.0.1";
  if (host == "*" || host.empty()) host = "0.0.0.0";
  char* end = nullptr;
  const long first = strtol(port.c_str(), &end, 10);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (port.empty() || *end || first < 0 || first > 65535 || inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    GYRE_WARN("GYRE_STATUS_ADDR=%s: expected PORT or HOST:PORT with a numeric IPv4 HOST; no status port",
              spec.c_str());
    return -1;
  }
  for (long p = first; p < first + (first == 0 ? 1 : kPortSpan) && p <= 65535; ++p) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    addr.sin_port = htons(static_cast<uint16_t>(p));
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && listen(fd, 16) == 0) {
      socklen_t len = sizeof addr;
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      *bound = host + ":" + std::to_string(ntohs(addr.sin_port));
      return fd;
    }
    close(fd);
  }
  GYRE_WARN("GYRE_STATUS_ADDR=%s: no free port in %ld..%ld; no status port", spec.c_str(), first,
            std::min<long>(first + kPortSpan - 1, 65535));
  return -1;
}

// Sockets left by processes that died without destroying their
// communicators (killed): removed, so the folder does not fill up.
void removeStaleSockets(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".sock") != 0) continue;
    const int pid = atoi(name.c_str());
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) unlink((dir + "/" + name).c_str());
  }
  closedir(d);
}

bool start(Server& s) {
  const std::string dir = statusDir(true);
  if (dir.empty()) return false;
  removeStaleSockets(dir);
  s.path = dir + "/" + std::to_string(getpid()) + ".sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (s.path.size() >= sizeof addr.sun_path) {
    GYRE_INFO("INIT", "status socket path %s is too long; no status socket", s.path.c_str());
    return false;
  }
  memcpy(addr.sun_path, s.path.c_str(), s.path.size() + 1);
  unlink(s.path.c_str());  // a process of an earlier job with this pid left it
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 8) != 0 ||
      pipe2(s.wakeFds, O_CLOEXEC) != 0) {
    GYRE_INFO("INIT", "no status socket at %s: %s", s.path.c_str(), strerror(errno));
    if (fd >= 0) close(fd);
    unlink(s.path.c_str());
    return false;
  }
  chmod(s.path.c_str(), 0600);
  s.listenFd = fd;
  const std::string tcp = env::getString("GYRE_STATUS_ADDR");
  if (!tcp.empty()) {
    s.tcpFd = listenTcp(tcp, &s.tcpAddress);
    if (s.tcpFd >= 0) GYRE_INFO("INIT", "status port %s (queries must prove a communicator's secret)", s.tcpAddress.c_str());
  }
  s.thread = std::thread([hazard = ForkHazard(), listenFd = s.listenFd, tcpFd = s.tcpFd, wakeFd = s.wakeFds[0]] {
    run(listenFd, tcpFd, wakeFd);
  });
  return true;
}

void stop(Server& s) {
  if (s.listenFd < 0) return;
  char b = 1;
  (void)!write(s.wakeFds[1], &b, 1);
  s.thread.join();
  close(s.listenFd);
  if (s.tcpFd >= 0) close(s.tcpFd);
  s.tcpFd = -1;
  close(s.wakeFds[0]);
  close(s.wakeFds[1]);
  unlink(s.path.c_str());
  s.listenFd = -1;
}

// GYRE_STATUS_KEY_DIR: rank 0 of each communicator leaves the key a
// remote query needs (status_auth.h), readable by its user only.
std::string keyFilePath(const CommObserver& o) {
  const std::string dir = env::getString("GYRE_STATUS_KEY_DIR");
  if (dir.empty() || o.rank != 0) return "";
  return dir + "/" + statusauth::hex16(o.commId) + ".key";
}

void writeKeyFile(const CommObserver& o) {
  const std::string path = keyFilePath(o);
  if (path.empty()) return;
  const std::string tmp = path + "." + std::to_string(getpid()) + ".tmp";
  const std::string text = statusauth::keyFileText(o.commId, o.secret);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  const bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    GYRE_WARN("GYRE_STATUS_KEY_DIR: cannot write the status key %s: %s", path.c_str(), strerror(errno));
    unlink(tmp.c_str());
    return;
  }
  GYRE_INFO("INIT", "status key of communicator %016llx in %s", static_cast<unsigned long long>(o.commId),
            path.c_str());
}

bool enabled() {
  static const bool on = env::getString("GYRE_STATUS") != "0";
  return on;
}

}  // namespace

std::string statusDir(bool create) {
  std::string dir = env::getString("GYRE_STATUS_DIR");
  if (dir.empty()) {
    const char* runtime = getenv("XDG_RUNTIME_DIR");
    dir = runtime && *runtime ? std::string(runtime) + "/gyre" : "/tmp/gyre-" + std::to_string(getuid());
  }
  if (create && mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return "";
  struct stat st{};
  // Refuse a folder another user made (or that others can enter).
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) return create ? "" : dir;
  return dir;
}

void statusServeClient(int fd, bool local) { serve(fd, local); }

void statusRegister(CommObserver* o) {
  if (!enabled()) return;
  Server& s = server();
  std::lock_guard<std::mutex> life(s.lifecycle);
  if (s.listenFd < 0 && !start(s)) return;
  writeKeyFile(*o);
  std::lock_guard<std::mutex> lock(s.mu);
  s.comms.push_back(o);
}

void statusUnregister(CommObserver* o) {
  Server& s = server();
  std::lock_guard<std::mutex> life(s.lifecycle);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = std::find(s.comms.begin(), s.comms.end(), o);
    if (it == s.comms.end()) return;
    s.comms.erase(it);
    const std::string key = keyFilePath(*o);
    if (!key.empty()) unlink(key.c_str());
    if (!s.comms.empty()) return;
  }
  stop(s);  // without mu: the thread may be answering
}

}  // namespace gyre
