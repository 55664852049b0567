#include "src/observe/status_server.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "src/config/env.h"
#include "src/debug/log.h"
#include "src/observe/clock.h"
#include "src/observe/observer.h"

namespace gyre {
namespace {

constexpr int kRequestWaitMs = 500;  // a client that says nothing is dropped after this

struct Server {
  std::mutex lifecycle;  // the start and stop of the thread (taken before mu)
  std::mutex mu;         // guards comms; the thread takes it to answer
  std::vector<CommObserver*> comms;
  int listenFd = -1;
  int wakeFds[2] = {-1, -1};  // a byte on [1] stops the thread
  std::string path;
  std::thread thread;
  pid_t owner = 0;  // the process whose thread serves listenFd
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

std::string answer() {
  Server& s = server();
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  const double perTick = secondsPerTick();
  const uint64_t now = readTicks();
  std::string out;
  std::lock_guard<std::mutex> lock(s.mu);
  for (const CommObserver* o : s.comms) {
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

void writeAll(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// One client: checks who it is and what it asks, answers, closes.
void serve(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != getuid()) {
    writeAll(fd, "error: only the job's own user may read its status\n");
    return;
  }
  std::string request;
  char buf[64];
  while (request.find('\n') == std::string::npos && request.size() < 64) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, kRequestWaitMs) <= 0) break;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    request.append(buf, static_cast<size_t>(n));
  }
  const size_t eol = request.find('\n');
  if (eol == std::string::npos || request.compare(0, eol, kStatusRequest) != 0) {
    writeAll(fd, std::string("error: expected the request line '") + kStatusRequest + "'\n");
    return;
  }
  writeAll(fd, answer());
}

void run(int listenFd, int wakeFd) {
  for (;;) {
    pollfd p[2] = {{listenFd, POLLIN, 0}, {wakeFd, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    if (!(p[0].revents & POLLIN)) continue;
    int fd = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    serve(fd);
    close(fd);
  }
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
  s.owner = getpid();
  s.thread = std::thread(run, s.listenFd, s.wakeFds[0]);
  return true;
}

// A child forked from a process with communicators inherits the server's
// state but not its thread: it forgets both (closing only its copies of the
// descriptors, and neither waking nor unlinking the parent's).
void forgetInheritedServer(Server& s) {
  if (s.listenFd < 0 || s.owner == getpid()) return;
  close(s.listenFd);
  close(s.wakeFds[0]);
  close(s.wakeFds[1]);
  s.listenFd = -1;
  // Not a thread of this process: keep the handle out of reach of any
  // join or detach (leaked, a few bytes, once per fork).
  new std::thread(std::move(s.thread));
  std::lock_guard<std::mutex> lock(s.mu);
  s.comms.clear();
}

void stop(Server& s) {
  if (s.listenFd < 0) return;
  char b = 1;
  (void)!write(s.wakeFds[1], &b, 1);
  s.thread.join();
  close(s.listenFd);
  close(s.wakeFds[0]);
  close(s.wakeFds[1]);
  unlink(s.path.c_str());
  s.listenFd = -1;
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

void statusRegister(CommObserver* o) {
  if (!enabled()) return;
  Server& s = server();
  std::lock_guard<std::mutex> life(s.lifecycle);
  forgetInheritedServer(s);
  if (s.listenFd < 0 && !start(s)) return;
  std::lock_guard<std::mutex> lock(s.mu);
  s.comms.push_back(o);
}

void statusUnregister(CommObserver* o) {
  Server& s = server();
  std::lock_guard<std::mutex> life(s.lifecycle);
  forgetInheritedServer(s);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = std::find(s.comms.begin(), s.comms.end(), o);
    if (it == s.comms.end()) return;
    s.comms.erase(it);
    if (!s.comms.empty()) return;
  }
  stop(s);  // without mu: the thread may be answering
}

}  // namespace gyre
