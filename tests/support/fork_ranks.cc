// fork_ranks.cc — the fork harness behind runRanks() (see fork_ranks.h).
// Over 500 lines on purpose: forking ranks, the line protocol of their report
// pipes, and serializing a run for the parent test share private state.
#include "fork_ranks.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <set>
#include <sstream>
#include <mutex>
#include <thread>

namespace gyre::test {

// ---- Child side ---------------------------------------------------------------------

namespace {

int g_reportFd = -1;  // write end of this child's pipe; -1 in the parent
int g_failures = 0;
std::vector<ncclUniqueId> g_ids;

// One line per message; a single write() of at most PIPE_BUF bytes is atomic.
void sendLine(char tag, const std::string& body) {
  if (g_reportFd < 0) {
    fprintf(stderr, "[fork_ranks: not in a rank] %c %s\n", tag, body.c_str());
    return;
  }
  std::string line;
  line.reserve(body.size() + 3);
  line += tag;
  line += ' ';
  for (char c : body) line += (c == '\n' || c == '\r') ? ' ' : c;
  if (line.size() > 3000) line.resize(3000);
  line += '\n';
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = write(g_reportFd, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += size_t(n);
  }
}

std::string vformat(const char* fmt, va_list ap) {
  char buf[2048];
  vsnprintf(buf, sizeof buf, fmt, ap);
  return buf;
}

}  // namespace

void rankFail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  ++g_failures;
  sendLine('F', msg);
}

void rankFailAt(const char* file, int line, const char* cond, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  char head[512];
  snprintf(head, sizeof head, "%s:%d: check failed: %s: ", base ? base + 1 : file, line, cond);
  ++g_failures;
  sendLine('F', head + msg);
}

void rankRecord(const std::string& key, const std::string& value) {
  sendLine('R', key + '\t' + value);
}

namespace {
std::string lineKey(int i) {
  char key[16];
  snprintf(key, sizeof key, "line%04d", i);
  return key;
}
}  // namespace

void rankRecordLines(const std::string& text) {
  std::istringstream lines(text);
  int i = 0;
  for (std::string line; std::getline(lines, line); ++i) rankRecord(lineKey(i), line);
  rankRecord("lines", std::to_string(i));
}

std::vector<std::string> recordedLines(const RankOutcome& r) {
  std::vector<std::string> out;
  auto n = r.records.find("lines");
  if (n == r.records.end()) return out;
  for (int i = 0, count = std::stoi(n->second); i < count; ++i) out.push_back(r.records.at(lineKey(i)));
  return out;
}

void rankMark() { sendLine('M', ""); }

void rankProgress(const std::string& what) { sendLine('P', what); }

const std::vector<ncclUniqueId>& rankIds() { return g_ids; }

int rankFailureCount() { return g_failures; }

// Defined below with the launcher's state.
void taskRecordImpl(const std::string& key, const std::string& value);
void taskRecord(const std::string& key, const std::string& value) { taskRecordImpl(key, value); }

// ---- Outcomes -----------------------------------------------------------------------

bool RankOutcome::ok() const {
  if (killedAsPlanned) return failures.empty();
  return exited && exitCode == 0 && failures.empty();
}

std::string RankOutcome::describe() const {
  std::ostringstream out;
  out << "rank " << rank << " (pid " << pid << "): ";
  if (timedOut) {
    out << "still running at the deadline; SIGKILLed by the harness";
  } else if (killedAsPlanned) {
    out << "SIGKILLed as planned";
  } else if (exited) {
    out << "exit code " << exitCode;
  } else if (signal != 0) {
    out << "killed by signal " << signal << " (" << strsignal(signal) << ")";
  } else {
    out << "state unknown";
  }
  out << " at " << endTime_s << " s";
  if (!ok() && !progress.empty()) out << "; last progress: " << progress;
  for (const std::string& f : failures) out << "\n    " << f;
  return out.str();
}

bool RunResult::allOk() const {
  if (!setupError.empty()) return false;
  for (const RankOutcome& r : ranks)
    if (!r.ok()) return false;
  return true;
}

std::string RunResult::describe() const {
  if (!setupError.empty()) return "harness setup failed: " + setupError;
  std::ostringstream out;
  int bad = 0;
  for (const RankOutcome& r : ranks) {
    if (r.ok()) continue;
    out << (bad++ ? "\n" : "") << r.describe();
  }
  if (bad == 0) out << "all " << ranks.size() << " ranks ok in " << elapsed_s << " s";
  return out.str();
}

std::string RunResult::recordMismatches() const {
  std::map<std::string, std::vector<std::pair<int, std::string>>> byKey;
  for (const RankOutcome& r : ranks)
    for (const auto& [k, v] : r.records) byKey[k].push_back({r.rank, v});
  std::ostringstream out;
  int shown = 0, total = 0;
  for (const auto& [key, values] : byKey) {
    bool differ = false;
    for (const auto& rv : values) differ |= rv.second != values.front().second;
    size_t expected = 0;
    for (const RankOutcome& r : ranks) expected += r.killedAsPlanned ? 0 : 1;
    bool missing = values.size() < expected;
    if (!differ && !missing) continue;
    if (++total > 10) continue;
    out << (shown++ ? "\n" : "") << key << ":";
    for (const auto& [rank, v] : values) out << " rank" << rank << "=" << v;
    if (missing) out << " (missing on some ranks)";
  }
  if (total > 10) out << "\n... and " << (total - 10) << " more keys differ";
  return out.str();
}

// ---- Parent side --------------------------------------------------------------------

namespace {

using EnvList = std::vector<std::pair<std::string, std::optional<std::string>>>;

void applyEnv(const EnvList& env) {
  for (const auto& [name, value] : env) {
    if (value) setenv(name.c_str(), value->c_str(), 1);
    else unsetenv(name.c_str());
  }
}

std::mutex g_taskMutex;
std::map<std::string, std::string> g_taskRecords;  // in the launcher

// Signals whose Catch2 handlers must not run in a forked process: a crash there
// should end it with that signal, which its parent then reports.
void resetChildSignals() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGPIPE}) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Reads exactly `size` bytes from `fd` by `deadline` (monotonicSeconds()).
bool receiveAll(int fd, void* out, size_t size, double deadline) {
  size_t got = 0;
  while (got < size && monotonicSeconds() < deadline) {
    pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    ssize_t n = read(fd, static_cast<char*>(out) + got, size - got);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return false;
    if (n > 0) got += size_t(n);
  }
  return got == size;
}

// Sends all of `data`; false if the peer is gone (never SIGPIPE).
bool sendAll(int fd, const void* data, size_t size) {
  size_t sent = 0;
  while (sent < size) {
    ssize_t n = send(fd, static_cast<const char*>(data) + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += size_t(n);
  }
  return true;
}

[[noreturn]] void runChild(int rank, int nranks, const RankFn& fn, pid_t parent, int writeFd,
                           const std::vector<int>& fdsToClose,
                           const EnvList& env, const EnvList& rankEnv, IdMode mode,
                           int idFd, int idCount, double timeout_s) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(120);
  for (int fd : fdsToClose) close(fd);
  g_reportFd = writeFd;
  g_failures = 0;
  resetChildSignals();
#ifdef __SANITIZE_THREAD__
  // ThreadSanitizer's runtime starts a thread of its own in a forked child
  // and another at the child's first pthread_create; starting (and joining)
  // one here puts both in the thread count every rank takes as its baseline,
  // so a leak check sees only gyre's threads.
  std::thread([] {}).join();
#endif
  applyEnv(env);
  applyEnv(rankEnv);

  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (mode == IdMode::kParent) {
    g_ids.assign(size_t(idCount), id);
    if (!receiveAll(idFd, g_ids.data(), g_ids.size() * sizeof id, monotonicSeconds() + timeout_s)) {
      rankFail("rank %d: no unique id from the launcher", rank);
      _exit(2);
    }
    close(idFd);
    id = g_ids.at(0);
  } else if (mode == IdMode::kEnvCommId) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      rankFail("ncclGetUniqueId with NCCL_COMM_ID=%s failed: %d %s", getenv("NCCL_COMM_ID"),
               int(r), ncclGetLastError(nullptr));
      _exit(2);
    }
    g_ids = {id};
  }

  int rc = 0;
  try {
    rc = fn(rank, nranks, id);
  } catch (const std::exception& e) {
    rankFail("rank %d threw: %s", rank, e.what());
    rc = 3;
  } catch (...) {
    rankFail("rank %d threw a non-standard exception", rank);
    rc = 3;
  }
  if (rc == 0 && g_failures > 0) rc = 1;
  fflush(stdout);
  fflush(stderr);
  _exit(rc & 0xff);
}

void parseLines(std::string* pending, RankOutcome* out, bool* marked) {
  size_t pos;
  while ((pos = pending->find('\n')) != std::string::npos) {
    std::string line = pending->substr(0, pos);
    pending->erase(0, pos + 1);
    if (line.size() < 2) continue;
    std::string body = line.substr(2);
    switch (line[0]) {
      case 'F':
        if (out->failures.size() < 40) out->failures.push_back(body);
        else if (out->failures.size() == 40) out->failures.push_back("(further failures dropped)");
        break;
      case 'R': {
        size_t tab = body.find('\t');
        if (tab != std::string::npos) out->records[body.substr(0, tab)] = body.substr(tab + 1);
        break;
      }
      case 'P': out->progress = body; break;
      case 'M': *marked = true; break;
      default: break;
    }
  }
}

// Reads whatever is available without blocking; returns false at end of file.
bool drain(int fd, std::string* pending) {
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      pending->append(buf, size_t(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

void recordStatus(RankOutcome* o, int status) {
  if (WIFEXITED(status)) {
    o->exited = true;
    o->exitCode = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    o->signal = WTERMSIG(status);
  }
}

// Runs in the launcher: makes the ids, forks the ranks, waits for them.
RunResult launchRanks(int nranks, const RankFn& fn, const RankOptions& options) {
  RunResult result;
  if (nranks < 1) {
    result.setupError = "nranks < 1";
    return result;
  }

  EnvList env = options.env;
  if (options.idMode == IdMode::kEnvCommId) {
    result.commIdPort = pickFreePort();
    if (result.commIdPort <= 0) {
      result.setupError = "could not find a free port for NCCL_COMM_ID";
      return result;
    }
    env.insert(env.begin(), {"NCCL_COMM_ID", "127.0.0.1:" + std::to_string(result.commIdPort)});
  } else {
    env.insert(env.begin(), {"NCCL_COMM_ID", std::nullopt});
  }
  applyEnv(env);  // the launcher is disposable: its environment is the test's
  // In IdMode::kParent the ranks are forked before the ids are made: ncclGetUniqueId
  // starts the rendezvous thread, and no thread may be alive at fork(). Each rank
  // then reads the ids from a socket of its own.
  const int idCount = std::max(1, options.idCount);
  std::vector<int> idFds(nranks, -1), idSendFds(nranks, -1);
  if (options.idMode == IdMode::kParent) {
    for (int r = 0; r < nranks; ++r) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        result.setupError = std::string("socketpair: ") + strerror(errno);
        for (int fd : idFds) if (fd >= 0) close(fd);
        for (int fd : idSendFds) if (fd >= 0) close(fd);
        return result;
      }
      idFds[r] = sv[0];
      idSendFds[r] = sv[1];
    }
  }

  std::vector<int> readFds(nranks, -1), writeFds(nranks, -1);
  for (int r = 0; r < nranks; ++r) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      result.setupError = std::string("pipe2: ") + strerror(errno);
      for (int fd : readFds) if (fd >= 0) close(fd);
      for (int fd : writeFds) if (fd >= 0) close(fd);
      return result;
    }
    readFds[r] = p[0];
    writeFds[r] = p[1];
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
  }

  result.ranks.resize(nranks);
  RunContext ctx;
  ctx.nranks = nranks;
  ctx.pids.assign(nranks, -1);
  ctx.commIdPort = result.commIdPort;
  std::atomic<bool> finished{false};
  ctx.finished = &finished;
  const pid_t parent = getpid();
  const double start = monotonicSeconds();
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < nranks; ++r) {
    std::vector<int> toClose;
    for (int q = 0; q < nranks; ++q) {
      toClose.push_back(readFds[q]);
      if (q != r) toClose.push_back(writeFds[q]);
      if (idSendFds[q] >= 0) toClose.push_back(idSendFds[q]);
      if (q != r && idFds[q] >= 0) toClose.push_back(idFds[q]);
    }
    pid_t pid = fork();
    if (pid == 0)
      runChild(r, nranks, fn, parent, writeFds[r], toClose, env, options.rankEnv ? options.rankEnv(r) : EnvList{},
               options.idMode, idFds[r], idCount, options.timeout_s);
    result.ranks[r].rank = r;
    result.ranks[r].pid = pid;
    ctx.pids[r] = pid;
    if (pid < 0) {
      result.setupError = std::string("fork: ") + strerror(errno);
      break;
    }
  }
  for (int fd : writeFds) close(fd);
  for (int fd : idFds) if (fd >= 0) close(fd);
  if (options.idMode == IdMode::kParent) {
    std::vector<ncclUniqueId> ids;
    for (int i = 0; i < idCount && result.setupError.empty(); ++i) {
      ncclUniqueId id;
      memset(&id, 0, sizeof id);
      ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess)
        result.setupError = "ncclGetUniqueId in the launcher failed: " + std::to_string(int(r)) + " " + lastError();
      ids.push_back(id);
    }
    // Without ids the ranks read end of file and exit; the loop below reaps them.
    for (int r = 0; r < nranks; ++r) {
      if (result.setupError.empty() && result.ranks[r].pid > 0) sendAll(idSendFds[r], ids.data(), ids.size() * sizeof(ncclUniqueId));
      close(idSendFds[r]);
    }
  }

  std::thread task;
  if (options.parentTask && result.setupError.empty())
    task = std::thread([&options, ctx] { options.parentTask(ctx); });

  const double deadline = start + options.timeout_s;
  std::vector<std::string> pending(nranks);
  std::vector<bool> open(nranks, true), running(nranks, false);
  for (int r = 0; r < nranks; ++r) running[r] = result.ranks[r].pid > 0;
  double killAt = -1;
  bool killSent = false;
  auto anyRunning = [&] { return std::find(running.begin(), running.end(), true) != running.end(); };

  while (anyRunning()) {
    std::vector<pollfd> pfds;
    for (int r = 0; r < nranks; ++r)
      if (open[r]) pfds.push_back({readFds[r], POLLIN, 0});
    poll(pfds.data(), pfds.size(), 5);
    for (int r = 0; r < nranks; ++r) {
      if (!open[r]) continue;
      open[r] = drain(readFds[r], &pending[r]);
      bool marked = false;
      parseLines(&pending[r], &result.ranks[r], &marked);
      if (marked && r == options.killRank && killAt < 0)
        killAt = monotonicSeconds() + options.killDelay_s;
    }
    double now = monotonicSeconds();
    if (killAt >= 0 && !killSent && now >= killAt && running[options.killRank]) {
      kill(result.ranks[options.killRank].pid, SIGKILL);
      killSent = true;
    }
    for (int r = 0; r < nranks; ++r) {
      if (!running[r]) continue;
      int status = 0;
      pid_t got = waitpid(result.ranks[r].pid, &status, WNOHANG);
      if (got == result.ranks[r].pid) {
        running[r] = false;
        recordStatus(&result.ranks[r], status);
        result.ranks[r].endTime_s = monotonicSeconds() - start;
        if (killSent && r == options.killRank && result.ranks[r].signal == SIGKILL)
          result.ranks[r].killedAsPlanned = true;
      }
    }
    if (now > deadline) {
      for (int r = 0; r < nranks; ++r) {
        if (!running[r]) continue;
        kill(result.ranks[r].pid, SIGKILL);
        result.ranks[r].timedOut = true;
      }
      // SIGKILL cannot be caught; reaping is bounded anyway in case a child is stuck
      // in uninterruptible sleep.
      const double reapDeadline = monotonicSeconds() + 10;
      while (anyRunning() && monotonicSeconds() < reapDeadline) {
        for (int r = 0; r < nranks; ++r) {
          if (!running[r]) continue;
          int status = 0;
          if (waitpid(result.ranks[r].pid, &status, WNOHANG) == result.ranks[r].pid) {
            running[r] = false;
            recordStatus(&result.ranks[r], status);
            result.ranks[r].endTime_s = monotonicSeconds() - start;
          }
        }
        usleep(2000);
      }
      break;
    }
  }

  // Children are gone; collect what is still in the pipes (bounded by EOF/EAGAIN).
  for (int r = 0; r < nranks; ++r) {
    if (open[r]) drain(readFds[r], &pending[r]);
    bool marked = false;
    parseLines(&pending[r], &result.ranks[r], &marked);
    close(readFds[r]);
  }
  finished = true;
  if (task.joinable()) task.join();
  result.elapsed_s = monotonicSeconds() - start;
  std::lock_guard<std::mutex> lock(g_taskMutex);
  result.taskRecords = g_taskRecords;
  return result;
}

// ---- Launcher <-> test process ------------------------------------------------------

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string serialize(const RunResult& r) {
  std::ostringstream out;
  out.precision(17);
  if (!r.setupError.empty()) out << "E " << oneLine(r.setupError) << "\n";
  out << "T " << r.elapsed_s << " " << r.commIdPort << "\n";
  for (const RankOutcome& o : r.ranks) {
    out << "K " << o.rank << " " << o.pid << " " << o.exited << " " << o.exitCode << " "
        << o.signal << " " << o.timedOut << " " << o.killedAsPlanned << " " << o.endTime_s << "\n";
    for (const std::string& f : o.failures) out << "F " << o.rank << " " << oneLine(f) << "\n";
    for (const auto& [k, v] : o.records)
      out << "R " << o.rank << " " << oneLine(k) << "\t" << oneLine(v) << "\n";
    if (!o.progress.empty()) out << "P " << o.rank << " " << oneLine(o.progress) << "\n";
  }
  for (const auto& [k, v] : r.taskRecords) out << "X " << oneLine(k) << "\t" << oneLine(v) << "\n";
  out << "Z\n";  // end marker: a launcher that died part-way never writes it
  return out.str();
}

bool deserialize(const std::string& text, RunResult* r) {
  std::istringstream in(text);
  std::string line;
  bool complete = false;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const char tag = line[0];
    std::string body = line.size() > 2 ? line.substr(2) : "";
    std::istringstream fields(body);
    auto rankLine = [&](int* rank) {  // "<rank> <rest>"
      size_t sp = body.find(' ');
      *rank = atoi(body.c_str());
      return sp == std::string::npos ? std::string() : body.substr(sp + 1);
    };
    int rank = 0;
    std::string rest;
    switch (tag) {
      case 'E': r->setupError = body; break;
      case 'T': fields >> r->elapsed_s >> r->commIdPort; break;
      case 'K': {
        RankOutcome o;
        fields >> o.rank >> o.pid >> o.exited >> o.exitCode >> o.signal >> o.timedOut >>
            o.killedAsPlanned >> o.endTime_s;
        r->ranks.push_back(o);
        break;
      }
      case 'F': case 'R': case 'P':
        rest = rankLine(&rank);
        for (RankOutcome& o : r->ranks) {
          if (o.rank != rank) continue;
          if (tag == 'F') o.failures.push_back(rest);
          if (tag == 'P') o.progress = rest;
          if (tag == 'R') {
            size_t tab = rest.find('\t');
            if (tab != std::string::npos) o.records[rest.substr(0, tab)] = rest.substr(tab + 1);
          }
        }
        break;
      case 'X': {
        size_t tab = body.find('\t');
        if (tab != std::string::npos) r->taskRecords[body.substr(0, tab)] = body.substr(tab + 1);
        break;
      }
      case 'Z': complete = true; break;
      default: break;
    }
  }
  return complete;
}

// RANKS_BACKSTOP_SCALE stretches every run's backstop (options.timeout_s),
// not the deadlines the tests assert: scripts/sanitize sets it, since
// instrumented ranks run several times slower.
double backstopScale() {
  const char* v = getenv("RANKS_BACKSTOP_SCALE");
  const double scale = v ? atof(v) : 1.0;
  return scale >= 1.0 ? scale : 1.0;
}

}  // namespace

RunResult runRanks(int nranks, const RankFn& fn, const RankOptions& requested) {
  RankOptions options = requested;
  options.timeout_s *= backstopScale();
  RunResult result;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    result.setupError = std::string("pipe2: ") + strerror(errno);
    return result;
  }
  const pid_t self = getpid();
  fflush(stdout);
  fflush(stderr);
  const pid_t launcher = fork();
  if (launcher < 0) {
    result.setupError = std::string("fork: ") + strerror(errno);
    close(p[0]);
    close(p[1]);
    return result;
  }
  if (launcher == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != self) _exit(120);
    close(p[0]);
    resetChildSignals();
    const std::string text = serialize(launchRanks(nranks, fn, options));
    size_t off = 0;
    while (off < text.size()) {
      ssize_t n = write(p[1], text.data() + off, text.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      off += size_t(n);
    }
    fflush(stdout);
    fflush(stderr);
    _exit(0);
  }
  close(p[1]);

  // The launcher enforces options.timeout_s on the ranks and bounds its own reaping;
  // this deadline only catches a launcher that is itself stuck.
  const double deadline = monotonicSeconds() + options.timeout_s + 30;
  std::string text;
  bool eof = false;
  while (!eof && monotonicSeconds() < deadline) {
    pollfd pfd = {p[0], POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    char buf[65536];
    ssize_t n = read(p[0], buf, sizeof buf);
    if (n > 0) text.append(buf, size_t(n));
    else if (n == 0 || errno != EINTR) eof = true;
  }
  close(p[0]);
  if (!eof) kill(launcher, SIGKILL);  // its ranks follow through PR_SET_PDEATHSIG
  int status = 0;
  const double reapDeadline = monotonicSeconds() + 10;
  while (waitpid(launcher, &status, WNOHANG) == 0 && monotonicSeconds() < reapDeadline)
    usleep(2000);
  if (!deserialize(text, &result)) {
    std::string why = !eof ? "the launcher was still running after " +
                                 std::to_string(int(options.timeout_s + 30)) + " s and was killed"
                           : "the launcher died before reporting";
    if (WIFSIGNALED(status)) why += " (signal " + std::to_string(WTERMSIG(status)) + ")";
    result.setupError = why;
  }
  return result;
}

void taskRecordImpl(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(g_taskMutex);
  g_taskRecords[key] = value;
}

// ---- Helpers ------------------------------------------------------------------------

double monotonicSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

int pickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

namespace {
int countDirEntries(const char* path) {
  DIR* d = opendir(path);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

std::string threadNames() {
  std::string names;
  DIR* d = opendir("/proc/self/task");
  if (!d) return names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string path = std::string("/proc/self/task/") + e->d_name + "/comm";
    char buf[64] = {0};
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t n = read(fd, buf, sizeof buf - 1);
      close(fd);
      if (n > 0 && buf[n - 1] == '\n') buf[n - 1] = 0;
    }
    names += std::string(names.empty() ? "" : ", ") + e->d_name + ":" + buf;
  }
  closedir(d);
  return names;
}
}  // namespace

// Both counts include the fd that opendir itself holds, so before/after compare equal.
int countOpenFds() { return countDirEntries("/proc/self/fd"); }
int countThreads() { return countDirEntries("/proc/self/task"); }

std::map<int, std::string> listOpenFds() {
  std::map<int, std::string> fds;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return fds;
  int self = dirfd(d);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd == self) continue;
    char target[512] = {0};
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
    fds[fd] = n > 0 ? std::string(target, size_t(n)) : "?";
  }
  closedir(d);
  return fds;
}

std::string waitForBaseline(int fds, int threads, const std::map<int, std::string>& fdsBefore,
                            double settle_s) {
  const double deadline = monotonicSeconds() + settle_s;
  int nowFds = countOpenFds(), nowThreads = countThreads();
  while ((nowFds != fds || nowThreads != threads) && monotonicSeconds() < deadline) {
    usleep(10000);
    nowFds = countOpenFds();
    nowThreads = countThreads();
  }
  if (nowFds == fds && nowThreads == threads) return "";
  std::ostringstream out;
  out << "open fds " << fds << " -> " << nowFds << ", threads " << threads << " -> "
      << nowThreads << " after " << settle_s << " s";
  if (nowFds != fds) {
    out << "; fds not there before:";
    for (const auto& [fd, target] : listOpenFds()) {
      auto it = fdsBefore.find(fd);
      if (it == fdsBefore.end() || it->second != target) out << " " << fd << "->" << target;
    }
  }
  if (nowThreads != threads) out << "; threads now: " << threadNames();
  return out.str();
}

bool containsWord(const std::string& text, const std::string& word) {
  auto isWordChar = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t pos = text.find(word); pos != std::string::npos; pos = text.find(word, pos + 1)) {
    bool before = pos == 0 || !isWordChar(text[pos - 1]);
    size_t end = pos + word.size();
    bool after = end >= text.size() || !isWordChar(text[end]);
    if (before && after) return true;
  }
  return false;
}

bool containsNoCase(const std::string& text, const std::string& needle) {
  auto lower = [](std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  return lower(text).find(lower(needle)) != std::string::npos;
}

std::string lastError() {
  const char* e = ncclGetLastError(nullptr);
  return e ? e : "";
}

}  // namespace gyre::test
