// gyre-info status (tools/info_status.cc) against a 3-rank host job whose
// rank 2 stops itself (SIGSTOP) before its third AllReduce while ranks 0
// and 1 enter it: a run of the tool (of up to 5 tries) says in under a
// second that rank 2 holds up ranks 0 and 1, and --counters shows each
// rank's calls so far. Garbage, silence or another user on a status
// socket get a clear refusal and change nothing: once rank 2 continues,
// every AllReduce is exact. The sockets are gone after ncclCommDestroy.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "fork_ranks.h"

using namespace gyre::test;

namespace {

constexpr int kCalls = 5, kStopBefore = 2;

char processState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

std::string runTool(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  return out;
}

// On a connected socket: sends `request` (if any), then `then` once the
// first reply line has come (if any), and returns all it read until the
// peer closes or is silent for 3 s; closes `fd`.
std::string converse(int fd, const std::string& request, const std::string& then = "") {
  if (!request.empty()) (void)!write(fd, request.data(), request.size());
  std::string reply;
  bool sentThen = then.empty();
  char buf[512];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 3000) <= 0) break;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
    if (!sentThen && reply.find('\n') != std::string::npos) {
      (void)!write(fd, then.data(), then.size());
      sentThen = true;
    }
  }
  close(fd);
  return reply;
}

// Connects to `addr` and converses, or says why it could not connect.
std::string connectAndConverse(int family, const sockaddr* addr, socklen_t len, const std::string& request,
                               const std::string& then = "") {
  int fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0) return "socket failed";
  if (connect(fd, addr, len) != 0) {
    std::string e = std::string("connect failed: ") + strerror(errno);
    close(fd);
    return e;
  }
  return converse(fd, request, then);
}

// Connects to a status socket, sends `request` (if any) and returns the reply.
std::string talk(const std::string& path, const std::string& request) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), std::min(path.size() + 1, sizeof addr.sun_path - 1));
  return connectAndConverse(AF_UNIX, reinterpret_cast<sockaddr*>(&addr), sizeof addr, request);
}

// As user nobody, in a child process: what the socket says to another user.
std::string talkAsOtherUser(const std::string& path) {
  int pipeFds[2];
  if (pipe(pipeFds) != 0) return "pipe failed";
  pid_t child = fork();
  if (child == 0) {
    close(pipeFds[0]);
    std::string r = setuid(65534) == 0 ? talk(path, "GYRE-STATUS 1\n") : "skip: cannot become another user";
    (void)!write(pipeFds[1], r.data(), r.size());
    _exit(0);
  }
  close(pipeFds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(pipeFds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(pipeFds[0]);
  waitpid(child, nullptr, 0);
  return out;
}

int socketsIn(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += strstr(e->d_name, ".sock") ? 1 : 0;
    closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("gyre-info status names the stopped rank that holds the others up within a second", "[observe]") {
  const char* tool = getenv("OBSERVE_GYRE_INFO");
  REQUIRE(tool);
  char pattern[] = "/tmp/gyre-status-test-XXXXXX";
  REQUIRE(mkdtemp(pattern));
  const std::string dir = pattern;
  RankOptions options;
  options.timeout_s = 90;
  options.env = {{"GYRE_STATUS_DIR", dir}, {"GYRE_TIMEOUT", "60"}};
  options.parentTask = [&](const RunContext& ctx) {
    const pid_t victim = ctx.pids[2];
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(40);
    while (processState(victim) != 'T' && std::chrono::steady_clock::now() < give_up && !ctx.finished->load())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    taskRecord("stopped", processState(victim) == 'T' ? "yes" : "no");
    // Ranks 0 and 1 enter the AllReduce right after rank 2 stops.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int attempt = 0; attempt < 5; ++attempt) {
      const auto t0 = std::chrono::steady_clock::now();
      std::string out = runTool(std::string(tool) + " status --dir " + dir);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      taskRecord("output", out);
      taskRecord("seconds", std::to_string(seconds));
      // A loaded CI machine may be slow to start the tool once: try again.
      if (out.find("rank 2 holds up ranks 0,1") != std::string::npos && seconds < 1.0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    taskRecord("counters", runTool(std::string(tool) + " status --counters --dir " + dir));
    const std::string sock0 = dir + "/" + std::to_string(ctx.pids[0]) + ".sock";
    taskRecord("garbage", talk(sock0, "hello there\n"));
    taskRecord("silence", talk(sock0, ""));
    taskRecord("other user", talkAsOtherUser(sock0));
    kill(victim, SIGCONT);
  };
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "init: %s", lastError().c_str());
        for (int i = 0; i < kCalls; ++i) {
          if (rank == 2 && i == kStopBefore) raise(SIGSTOP);
          int64_t v = 10 * i + rank, sum = 0;
          RANK_CHECK(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, nullptr) == ncclSuccess, "AllReduce %d: %s",
                     i, lastError().c_str());
          RANK_CHECK(sum == 30 * i + 3, "AllReduce %d gave %lld", i, static_cast<long long>(sum));
        }
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  const std::string out = result.taskRecords["output"];
  INFO("gyre-info status printed:\n" << out);
  INFO("garbage: " << result.taskRecords["garbage"] << "\nsilence: " << result.taskRecords["silence"]
                   << "\nother user: " << result.taskRecords["other user"]);
  CHECK(result.allOk());
  REQUIRE(result.taskRecords["stopped"] == "yes");
  CHECK(out.find("rank 2 holds up ranks 0,1: did not answer") != std::string::npos);
  CHECK(out.find("rank 0 (pid " + std::to_string(result.ranks[0].pid) + "): in ncclAllReduce") != std::string::npos);
  CHECK(std::stod(result.taskRecords["seconds"]) < 1.0);
  // Ranks 0 and 1 have begun 3 AllReduces of one int64 each, rank 2 two.
  const std::string counters = result.taskRecords["counters"];
  INFO("gyre-info status --counters printed:\n" << counters);
  CHECK(counters.find("rank 0 (pid " + std::to_string(result.ranks[0].pid) + "): in ncclAllReduce") !=
        std::string::npos);
  CHECK(counters.find("ncclAllReduce: 3 calls, 24 B, ") != std::string::npos);
  // (Records carry a line's newline as a space.)
  CHECK(result.taskRecords["garbage"] == "error: expected the request line 'GYRE-STATUS 1' ");
  CHECK(result.taskRecords["silence"] == "error: expected the request line 'GYRE-STATUS 1' ");
  const std::string other = result.taskRecords["other user"];
  if (other.rfind("skip", 0) != 0)
    CHECK((other.rfind("connect failed: Permission denied", 0) == 0 ||
           other == "error: only the job's own user may read its status without the communicator's secret "));
  CHECK(socketsIn(dir) == 0);
  rmdir(dir.c_str());
}

namespace {

// Runs a command, returning its output and (in *status) its exit code.
std::string runToolStatus(const std::string& command, int* status) {
  std::string out;
  *status = -1;
  if (FILE* p = popen((command + " 2>&1").c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    const int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  return out;
}

// Connects to 127.0.0.1:port, sends `request` (if any), then `then` once
// a first line came back (if any); returns everything read.
std::string talkTcp(int port, const std::string& request, const std::string& then = "") {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  return connectAndConverse(AF_INET, reinterpret_cast<sockaddr*>(&addr), sizeof addr, request, then);
}

std::string onlyFileIn(const std::string& dir, const char* suffix) {
  std::string found;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (strstr(e->d_name, suffix)) found = dir + "/" + e->d_name;
    closedir(d);
  }
  return found;
}

}  // namespace

TEST_CASE("gyre-info status asks ranks' status ports with the communicator's secret and refuses anything else",
          "[observe]") {
  const char* tool = getenv("OBSERVE_GYRE_INFO");
  REQUIRE(tool);
  char sockPattern[] = "/tmp/gyre-status-sock-XXXXXX";
  char keyPattern[] = "/tmp/gyre-status-key-XXXXXX";
  REQUIRE(mkdtemp(sockPattern));
  REQUIRE(mkdtemp(keyPattern));
  const std::string sockDir = sockPattern, keyDir = keyPattern;
  const std::string doneFile = keyDir + "/done";
  // Below Linux's ephemeral range (32768 up): a port there can already be
  // a concurrently running test's connection, and the status server's bind
  // then fails.
  const int basePort = 20000 + static_cast<int>(getpid() % 12000);
  RankOptions options;
  options.timeout_s = 60;
  options.env = {{"GYRE_STATUS_DIR", sockDir},
                 {"GYRE_STATUS_KEY_DIR", keyDir},
                 {"GYRE_STATUS_ADDR", "127.0.0.1:" + std::to_string(basePort)},
                 {"GYRE_TIMEOUT", "30"}};
  options.parentTask = [&](const RunContext& ctx) {
    std::string key;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((key = onlyFileIn(keyDir, ".key")).empty() && std::chrono::steady_clock::now() < give_up &&
           !ctx.finished->load())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    struct stat st{};
    taskRecord("key mode", stat(key.c_str(), &st) == 0 ? std::to_string(st.st_mode & 0777) : "missing");
    std::string addrs;
    for (int i = 0; i < 3; ++i) addrs += " --addr 127.0.0.1:" + std::to_string(basePort + i);
    int status = 0;
    taskRecord("all", runToolStatus(std::string(tool) + " status" + addrs + " --key " + key, &status));
    taskRecord("all status", std::to_string(status));
    taskRecord("one", runToolStatus(std::string(tool) + " status --addr 127.0.0.1:" + std::to_string(basePort + 1) +
                                        " --key " + key, &status));
    // The same id with a secret one bit off.
    std::ifstream in(key);
    std::string magic, id, secret;
    in >> magic >> id >> secret;
    taskRecord("id", id);
    const std::string wrongKey = keyDir + "/wrong";
    std::ofstream(wrongKey) << magic << " " << id << " " << secret.substr(0, 15)
                            << (secret.back() == '0' ? '1' : '0') << "\n";
    taskRecord("wrong", runToolStatus(std::string(tool) + " status --addr 127.0.0.1:" + std::to_string(basePort) +
                                          " --key " + wrongKey, &status));
    taskRecord("wrong status", std::to_string(status));
    unlink(wrongKey.c_str());
    taskRecord("garbage", talkTcp(basePort, "hello there\n"));
    taskRecord("silence", talkTcp(basePort, ""));
    taskRecord("bad proof", talkTcp(basePort, "GYRE-STATUS 2 " + id + "\n", "proof xyz\n"));
    taskRecord("v1 over tcp", talkTcp(basePort, "GYRE-STATUS 1\n"));
    std::ofstream(doneFile) << "done\n";
  };
  RunResult result = runRanks(
      3,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "init: %s", lastError().c_str());
        // AllReduces, each checked, until the test is done asking (rank 0
        // sees its file and tells the others through the sum's high part).
        for (int i = 0; i < 100000; ++i) {
          const int64_t stop = rank == 0 && access(doneFile.c_str(), F_OK) == 0 ? int64_t{1} << 40 : 0;
          int64_t v = stop + 7 * i + rank, sum = 0;
          RANK_CHECK(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, nullptr) == ncclSuccess, "AllReduce %d: %s",
                     i, lastError().c_str());
          RANK_CHECK((sum & ((int64_t{1} << 40) - 1)) == 21 * i + 3, "AllReduce %d gave %lld", i,
                     static_cast<long long>(sum));
          if (sum >> 40) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  for (const char* k : {"key mode", "all", "all status", "one", "wrong", "wrong status", "garbage", "silence",
                        "bad proof", "v1 over tcp"})
    UNSCOPED_INFO(k << ": " << result.taskRecords[k]);
  CHECK(result.taskRecords["key mode"] == std::to_string(0600));
  const std::string id = result.taskRecords["id"];
  REQUIRE(id.size() == 16);
  const std::string all = result.taskRecords["all"];
  CHECK(result.taskRecords["all status"] == "0");
  CHECK(all.find("communicator " + id + ": 3 ranks") != std::string::npos);
  for (int r = 0; r < 3; ++r)
    CHECK(all.find("rank " + std::to_string(r) + " (pid " + std::to_string(result.ranks[r].pid) + "): ") !=
          std::string::npos);
  const std::string one = result.taskRecords["one"];
  // Which rank listens on the port asked depends on which process bound
  // first; the others are named from its view, as not asked.
  CHECK(one.find("rank 0 (pid " + std::to_string(result.ranks[0].pid)) != std::string::npos);
  CHECK(one.find("not asked (give its status port with --addr)") != std::string::npos);
  CHECK(result.taskRecords["wrong"].find("refused: wrong secret for communicator " + id) != std::string::npos);
  CHECK(result.taskRecords["wrong status"] == "1");
  CHECK(result.taskRecords["garbage"] == "error: expected the request line 'GYRE-STATUS 2 <communicator id>' ");
  CHECK(result.taskRecords["silence"] == "error: expected the request line 'GYRE-STATUS 2 <communicator id>' ");
  CHECK(result.taskRecords["v1 over tcp"] == "error: expected the request line 'GYRE-STATUS 2 <communicator id>' ");
  const std::string badProof = result.taskRecords["bad proof"];
  CHECK(badProof.rfind("challenge ", 0) == 0);
  CHECK(badProof.find("error: expected 'proof <16 hex digits>' after the challenge") != std::string::npos);
  // The job is gone: a clear answer, and its key file went with it.
  int status = 0;
  const std::string gone = runToolStatus(std::string(tool) + " status --addr 127.0.0.1:" + std::to_string(basePort) +
                                             " --key /dev/null", &status);
  CHECK(gone.find("not a gyre status key") != std::string::npos);
  CHECK(onlyFileIn(keyDir, ".key").empty());
  const std::string keyAgain = keyDir + "/again.key";
  std::ofstream(keyAgain) << "gyre-status-key " << id << " 0123456789abcdef\n";
  const std::string goneOut = runToolStatus(std::string(tool) + " status --addr 127.0.0.1:" +
                                                std::to_string(basePort) + " --key " + keyAgain, &status);
  INFO("after the job: " << goneOut);
  CHECK(goneOut.find("connection refused: the job is gone") != std::string::npos);
  CHECK(status == 1);
  unlink(keyAgain.c_str());
  unlink(doneFile.c_str());
  rmdir(keyDir.c_str());
  rmdir(sockDir.c_str());
}
