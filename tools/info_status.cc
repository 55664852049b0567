// gyre-info status: asks every gyre process of this user on this host
// (the sockets of src/observe/status_server.h), or the status ports named
// with --addr (proving the communicator's secret, status_auth.h), what its
// communicators are doing, and prints per communicator where each rank is and which rank
// holds the others up: one that does not answer (stopped or hung), or one
// that is idle or behind while others wait in a call.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/observe/status_auth.h"
#include "src/observe/status_server.h"
#include "tools/info.h"

namespace gyre::info {
namespace {

struct Client {
  std::string socketPath;  // or the status port's address
  bool remote = false;
  int pid = 0;
  int fd = -1;
  std::string reply;
  bool done = false;
  std::string error;  // why it gave no answer
};

struct RankState {
  int rank = -1, nranks = 0, pid = 0;
  std::string host, state;
  unsigned long long seq = 0;
  double forMs = 0;
  std::vector<std::pair<int, std::string>> peers;  // pid@host by rank
  std::vector<std::string> counters;               // "ncclAllReduce: 12 calls, ..."
};

int connectTo(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return -1;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

// Asks every socket at once and waits up to `waitMs` for all answers.
std::vector<Client> ask(const std::string& dir, int waitMs) {
  std::vector<Client> clients;
  DIR* d = opendir(dir.c_str());
  if (!d) return clients;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".sock") != 0) continue;
    Client c;
    c.socketPath = dir + "/" + name;
    c.pid = atoi(name.c_str());
    if (c.pid <= 0 || (kill(c.pid, 0) != 0 && errno == ESRCH)) continue;  // left by a process that is gone
    c.fd = connectTo(c.socketPath);
    if (c.fd < 0) {
      c.error = std::string("cannot connect: ") + strerror(errno);
      c.done = true;
    } else {
      std::string request = std::string(kStatusRequest) + "\n";
      if (send(c.fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
        c.error = "cannot send the request";
        c.done = true;
      }
    }
    clients.push_back(c);
  }
  closedir(d);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Client*> who;
    for (Client& c : clients)
      if (!c.done) {
        fds.push_back({c.fd, POLLIN, 0});
        who.push_back(&c);
      }
    if (fds.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      char buf[4096];
      ssize_t n = recv(fds[i].fd, buf, sizeof buf, 0);
      if (n > 0) who[i]->reply.append(buf, static_cast<size_t>(n));
      if (n <= 0 || who[i]->reply.find("end\n") != std::string::npos ||
          who[i]->reply.rfind("error:", 0) == 0)
        who[i]->done = true;
    }
  }
  for (Client& c : clients) {
    if (!c.done && c.error.empty()) c.error = "no answer within " + std::to_string(waitMs) + " ms (stopped or hung)";
    else if (c.reply.rfind("error:", 0) == 0) c.error = "refused: " + c.reply.substr(7, c.reply.find('\n') - 7);
    if (c.fd >= 0) close(c.fd);
  }
  return clients;
}

using Clock = std::chrono::steady_clock;

int msLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Connects to HOST:PORT by the deadline; -1 with *why set otherwise.
int connectTcp(const std::string& address, Clock::time_point deadline, std::string* why) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    *why = "not an address (expected HOST:PORT)";
    return -1;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.substr(0, colon).c_str(), address.substr(colon + 1).c_str(), &hints, &found) != 0 ||
      !found) {
    *why = "cannot resolve it";
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int r = fd < 0 ? -1 : connect(fd, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (fd < 0) {
    *why = strerror(errno);
    return -1;
  }
  if (r != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, msLeft(deadline)) <= 0) {
      err = ETIMEDOUT;
    } else {
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    r = err ? -1 : 0;
    errno = err;
  }
  if (r != 0) {
    *why = errno == ECONNREFUSED ? "connection refused: the job is gone, or did not open a status port "
                                   "(GYRE_STATUS_ADDR)"
           : errno == ETIMEDOUT  ? "no connection within the wait (host down or port filtered)"
                                 : strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

// Reads until `done` says the text is complete, the peer closes, or the deadline.
template <typename Done>
void readUntil(int fd, std::string* text, Clock::time_point deadline, Done done) {
  while (!done(*text)) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, msLeft(deadline)) <= 0) return;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    text->append(buf, static_cast<size_t>(n));
  }
}

// One status port, asked with the communicator's secret (status_auth.h).
Client askRemote(const std::string& address, uint64_t commId, uint64_t secret, int waitMs) {
  Client c;
  c.socketPath = address;
  c.remote = true;
  c.done = true;
  const auto deadline = Clock::now() + std::chrono::milliseconds(waitMs);
  std::string why;
  int fd = connectTcp(address, deadline, &why);
  if (fd < 0) {
    c.error = why;
    return c;
  }
  auto sendLine = [&](const std::string& line) {
    return send(fd, line.data(), line.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(line.size());
  };
  auto hasLine = [](const std::string& t) { return t.find('\n') != std::string::npos; };
  std::string text;
  statusauth::Challenge challenge{};
  if (!sendLine(std::string(statusauth::kRequest2) + " " + statusauth::hex16(commId) + "\n")) {
    c.error = "cannot send the request";
  } else {
    readUntil(fd, &text, deadline, hasLine);
    const size_t eol = text.find('\n');
    const std::string first = eol == std::string::npos ? text : text.substr(0, eol);
    if (first.rfind("error: ", 0) == 0) {
      c.error = "refused: " + first.substr(7);
    } else if (eol == std::string::npos) {
      c.error = "no answer within " + std::to_string(waitMs) + " ms (stopped or hung, or not a gyre status port)";
    } else if (first.rfind("challenge ", 0) != 0 || !statusauth::parseChallenge(first.substr(10), &challenge)) {
      c.error = "not a gyre status port (it answered '" + first.substr(0, 40) + "')";
    } else if (!sendLine("proof " + statusauth::hex16(statusauth::proofOf(secret, commId, challenge)) + "\n")) {
      c.error = "cannot send the proof";
    } else {
      text.erase(0, eol + 1);
      readUntil(fd, &text, deadline, [](const std::string& t) {
        return t.find("end\n") != std::string::npos || (t.rfind("error:", 0) == 0 && t.find('\n') != std::string::npos);
      });
      if (text.rfind("error: ", 0) == 0) c.error = "refused: " + text.substr(7, text.find('\n') - 7);
      else if (text.find("end\n") == std::string::npos)
        c.error = "no answer within " + std::to_string(waitMs) + " ms (stopped or hung)";
      else c.reply = text;
    }
  }
  close(fd);
  return c;
}

bool parseLine(const std::string& line, std::string* comm, RankState* r) {
  std::istringstream in(line);
  std::string word, peers;
  while (in >> word) {
    std::string v;
    if (!(in >> v)) return false;
    if (word == "comm") *comm = v;
    else if (word == "rank") r->rank = atoi(v.c_str());
    else if (word == "nranks") r->nranks = atoi(v.c_str());
    else if (word == "pid") r->pid = atoi(v.c_str());
    else if (word == "host") r->host = v;
    else if (word == "state") r->state = v;
    else if (word == "seq") r->seq = strtoull(v.c_str(), nullptr, 10);
    else if (word == "for_ms") r->forMs = atof(v.c_str());
    else if (word == "peers") peers = v;
  }
  std::istringstream list(peers);
  for (std::string item; std::getline(list, item, ',');) {
    size_t at = item.find('@');
    r->peers.push_back({atoi(item.c_str()), at == std::string::npos ? "" : item.substr(at + 1)});
  }
  return !comm->empty() && r->rank >= 0;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) {
    if (!s.empty()) s += ',';
    s += std::to_string(r);
  }
  return s;
}

std::string describe(const RankState& r) {
  char buf[160];
  if (r.state == "idle") snprintf(buf, sizeof buf, "idle after call %llu", r.seq);
  else snprintf(buf, sizeof buf, "in %s (call %llu) for %.1f s", r.state.c_str(), r.seq, r.forMs / 1e3);
  return buf;
}

void printComm(const std::string& comm, const std::map<int, RankState>& ranks,
               const std::map<int, std::string>& silentPids, bool counters, bool remote) {
  const RankState& any = ranks.begin()->second;
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  printf("communicator %s: %d rank%s\n", comm.c_str(), any.nranks, any.nranks == 1 ? "" : "s");
  std::vector<int> silent, elsewhere, busy, lagging;
  unsigned long long newest = 0;
  for (const auto& [rank, r] : ranks)
    if (r.state != "idle") newest = std::max(newest, r.seq);
  for (int rank = 0; rank < any.nranks; ++rank) {
    auto it = ranks.find(rank);
    if (it != ranks.end()) {
      printf("  rank %d (pid %d): %s\n", rank, it->second.pid, describe(it->second).c_str());
      if (counters)
        for (const std::string& c : it->second.counters) printf("      %s\n", c.c_str());
      if (it->second.state != "idle") busy.push_back(rank);
      // Behind: has not begun call `newest`, which another rank is in (idle
      // or in an earlier call; a rank idle after call `newest` is not behind).
      if (newest && it->second.seq < newest) lagging.push_back(rank);
      continue;
    }
    const auto& peer = rank < static_cast<int>(any.peers.size()) ? any.peers[rank] : std::pair<int, std::string>{0, ""};
    auto s = silentPids.find(peer.first);
    if (remote) {
      printf("  rank %d (pid %d on %s): not asked (give its status port with --addr)\n", rank, peer.first,
             peer.second.c_str());
      elsewhere.push_back(rank);
    } else if (peer.second != host) {
      printf("  rank %d (pid %d on %s): not on this host\n", rank, peer.first, peer.second.c_str());
      elsewhere.push_back(rank);
    } else {
      printf("  rank %d (pid %d): %s\n", rank, peer.first,
             s != silentPids.end() ? s->second.c_str() : "no status socket (gone, or GYRE_STATUS=0)");
      silent.push_back(rank);
    }
  }
  std::vector<int> holders = silent;
  std::string why = "did not answer";
  if (holders.empty() && !lagging.empty()) {
    holders = lagging;
    why = "has not reached the call the others are in";
  }
  if (!holders.empty() && !busy.empty()) {
    std::vector<int> waiting;
    for (int r : busy)
      if (std::find(holders.begin(), holders.end(), r) == holders.end()) waiting.push_back(r);
    printf("  => rank%s %s hold%s up rank%s %s: %s\n", holders.size() > 1 ? "s" : "", rankList(holders).c_str(),
           holders.size() > 1 ? "" : "s", waiting.size() > 1 ? "s" : "", rankList(waiting).c_str(), why.c_str());
  } else if (!elsewhere.empty() && !busy.empty()) {
    printf(remote ? "  => ranks %s wait; ranks %s were not asked\n"
                  : "  => ranks %s wait; ranks %s are on other hosts (run gyre-info status there)\n",
           rankList(busy).c_str(), rankList(elsewhere).c_str());
  } else if (!silent.empty()) {
    printf("  => rank%s %s did not answer (stopped or hung); the others are idle\n", silent.size() > 1 ? "s" : "",
           rankList(silent).c_str());
  } else if (busy.empty()) {
    printf(remote ? "  => all ranks asked are idle\n" : "  => all ranks here are idle\n");
  } else {
    printf("  => every rank is in a call; none is behind\n");
  }
}

}  // namespace

int runStatus(int argc, char** argv) {
  std::string dir = statusDir(false);
  int waitMs = 500;
  bool counters = false;
  std::vector<std::string> addresses;
  const char* keyEnv = getenv("GYRE_STATUS_KEY_FILE");
  std::string keyFile = keyEnv ? keyEnv : "";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--counters") counters = true;
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--wait-ms" && i + 1 < argc) waitMs = atoi(argv[++i]);
    else if (a == "--addr" && i + 1 < argc) addresses.push_back(argv[++i]);
    else if (a == "--key" && i + 1 < argc) keyFile = argv[++i];
    else {
      fprintf(stderr, "usage: gyre-info status [--counters] [--dir FOLDER] [--wait-ms N]\n"
                      "       gyre-info status --addr HOST:PORT [--addr ...] --key FILE [--counters] [--wait-ms N]\n"
                      "  --counters: each rank's calls, bytes and times per API function so far\n"
                      "  FOLDER: where the jobs' status sockets are (default %s)\n"
                      "  --addr: a rank's status port (GYRE_STATUS_ADDR), asked with the communicator's secret\n"
                      "  --key: the communicator's key file (GYRE_STATUS_KEY_DIR/<id>.key; or GYRE_STATUS_KEY_FILE)\n",
              statusDir(false).c_str());
      return 2;
    }
  }
  if (waitMs <= 0) waitMs = 500;
  std::vector<Client> clients;
  const bool remote = !addresses.empty();
  if (remote) {
    uint64_t commId = 0, secret = 0;
    std::string why;
    if (keyFile.empty()) {
      fprintf(stderr, "gyre-info status --addr: give the communicator's key file with --key FILE (written where "
                      "the job's GYRE_STATUS_KEY_DIR points)\n");
      return 2;
    }
    if (!statusauth::readKeyFile(keyFile, &commId, &secret, &why)) {
      fprintf(stderr, "gyre-info status: %s\n", why.c_str());
      return 2;
    }
    for (const std::string& address : addresses) clients.push_back(askRemote(address, commId, secret, waitMs));
    bool any = false;
    for (const Client& c : clients) {
      if (!c.error.empty()) printf("%s: %s\n", c.socketPath.c_str(), c.error.c_str());
      any |= c.error.empty();
    }
    if (!any) return 1;
  } else {
    clients = ask(dir, waitMs);
  }
  if (clients.empty()) {
    printf("no gyre process of this user with a communicator on this host (looked in %s)\n", dir.c_str());
    return 0;
  }
  std::map<std::string, std::map<int, RankState>> comms;
  std::map<int, std::string> silentPids;
  for (const Client& c : clients) {
    if (!c.error.empty()) {
      if (!c.remote) silentPids[c.pid] = c.error;
      continue;
    }
    std::istringstream lines(c.reply);
    for (std::string line; std::getline(lines, line);) {
      if (line == "end") break;
      if (line.rfind("counters ", 0) == 0) {
        // counters <comm> rank <r> <text>
        std::istringstream in(line);
        std::string word, comm, rankWord;
        int rank = -1;
        in >> word >> comm >> rankWord >> rank;
        std::string text;
        std::getline(in, text);
        if (rank >= 0 && comms[comm].count(rank)) comms[comm][rank].counters.push_back(text.substr(1));
        continue;
      }
      std::string comm;
      RankState r;
      if (parseLine(line, &comm, &r)) comms[comm][r.rank] = r;
    }
  }
  for (const auto& [comm, ranks] : comms) printComm(comm, ranks, silentPids, counters, remote);
  // Processes that did not answer and that no answering rank knows.
  for (const auto& [pid, why] : silentPids) {
    bool known = false;
    for (const auto& [comm, ranks] : comms)
      for (const auto& [rank, r] : ranks)
        for (const auto& p : r.peers) known = known || p.first == pid;
    if (!known) printf("process %d: %s\n", pid, why.c_str());
  }
  return 0;
}

}  // namespace gyre::info
