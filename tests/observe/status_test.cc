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
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
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

// Connects to a status socket, sends `request` (if any) and returns the reply.
std::string talk(const std::string& path, const std::string& request) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), std::min(path.size() + 1, sizeof addr.sun_path - 1));
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return "socket failed";
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::string e = std::string("connect failed: ") + strerror(errno);
    close(fd);
    return e;
  }
  if (!request.empty()) (void)!write(fd, request.data(), request.size());
  std::string reply;
  char buf[512];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 3000) <= 0) break;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return reply;
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
           other == "error: only the job's own user may read its status "));
  CHECK(socketsIn(dir) == 0);
  rmdir(dir.c_str());
}
