#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <catch2/catch.hpp>

#include "src/config/conf_file.h"
#include "src/config/env.h"
#include "src/debug/error.h"

using namespace gyre;

namespace {

// A scratch directory with a system file, a user file and a HOME, removed at
// the end; the environment variables the tests set are cleared too.
struct ConfFixture {
  std::string dir;
  ConfFixture() {
    char tmpl[] = "/tmp/gyre_conf_XXXXXX";
    REQUIRE(mkdtemp(tmpl));
    dir = tmpl;
    savedHome = getenv("HOME") ? getenv("HOME") : "";
  }
  ~ConfFixture() {
    for (const char* v : {"NCCL_CONF_FILE", "NCCL_MAX_NCHANNELS", "NCCL_BUFFLE_SIZE", "NCCL_BUFFSIZE"}) unsetenv(v);
    if (!savedHome.empty()) setenv("HOME", savedHome.c_str(), 1);
    for (const char* f : {"/system.conf", "/user.conf", "/.nccl.conf"}) unlink((dir + f).c_str());
    rmdir(dir.c_str());
    env::reloadForTesting();
  }
  std::string write(const char* name, const std::string& text) {
    std::string path = dir + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string savedHome;
};

bool mentions(const std::vector<std::string>& lines, const std::string& a, const std::string& b) {
  for (const std::string& l : lines)
    if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("nccl.conf lines: comments, spaces, quotes, and malformed lines reported by line") {
  std::vector<std::string> problems;
  auto entries = env::parseConfText("# comment\n\nNCCL_DEBUG=INFO\n  NCCL_BUFFSIZE = 8M  \nNCCL_SOCKET_IFNAME=\"eth0\"\n"
                                    "just words\n=5\nNCCL_ALGO=\n",
                                    "x.conf", &problems);
  REQUIRE(entries.size() == 4);
  CHECK(entries[0].name == "NCCL_DEBUG");
  CHECK(entries[0].value == "INFO");
  CHECK(entries[0].line == 3);
  CHECK(entries[1].name == "NCCL_BUFFSIZE");
  CHECK(entries[1].value == "8M");
  CHECK(entries[2].value == "eth0");
  CHECK(entries[3].value == "");
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].find("x.conf:6") != std::string::npos);
  CHECK(problems[1].find("x.conf:7") != std::string::npos);
}

TEST_CASE("settings come from the environment over the user file over the system file over the default") {
  ConfFixture f;
  std::string sys = f.write("/system.conf", "NCCL_BUFFSIZE=1M\nNCCL_MIN_NCHANNELS=2\nNCCL_DEBUG_FILE=/tmp/sys.log\n");
  std::string user = f.write("/user.conf", "NCCL_BUFFSIZE=2M\nNCCL_MAX_NCHANNELS=4\n");
  setenv("NCCL_CONF_FILE", user.c_str(), 1);
  setenv("NCCL_MAX_NCHANNELS", "8", 1);
  env::reloadForTesting(sys);

  env::Setting buff = env::lookup("NCCL_BUFFSIZE");
  CHECK(buff.value == "2M");
  CHECK(buff.source == env::Source::File);
  CHECK(buff.origin == user + ":1");
  CHECK(env::lookup("NCCL_MIN_NCHANNELS").origin == sys + ":2");
  CHECK(env::getString("NCCL_DEBUG_FILE") == "/tmp/sys.log");
  env::Setting maxCh = env::lookup("NCCL_MAX_NCHANNELS");
  CHECK(maxCh.value == "8");
  CHECK(maxCh.source == env::Source::Env);
  CHECK(env::lookup("GYRE_TIMEOUT").source == env::Source::Default);
  int64_t v = 0;
  REQUIRE(env::getInt("NCCL_BUFFSIZE", &v) == ncclSuccess);
  CHECK(v == 2 << 20);
  CHECK(env::configFilesRead() == std::vector<std::string>{sys, user});
  CHECK(env::validateAll() == ncclSuccess);
}

TEST_CASE("~/.nccl.conf is read when NCCL_CONF_FILE is not set") {
  ConfFixture f;
  f.write("/.nccl.conf", "NCCL_MAX_NCHANNELS=3\n");
  unsetenv("NCCL_CONF_FILE");
  setenv("HOME", f.dir.c_str(), 1);
  env::reloadForTesting("/nonexistent/nccl.conf");
  CHECK(env::getString("NCCL_MAX_NCHANNELS") == "3");
  CHECK(env::lookup("NCCL_MAX_NCHANNELS").origin == f.dir + "/.nccl.conf:1");
}

TEST_CASE("a bad value in a config file is an error naming the variable, the file and what is allowed") {
  ConfFixture f;
  std::string user = f.write("/user.conf", "# tuning\nNCCL_BUFFSIZE=lots\n");
  setenv("NCCL_CONF_FILE", user.c_str(), 1);
  env::reloadForTesting("/nonexistent/nccl.conf");
  REQUIRE(env::validateAll() == ncclInvalidArgument);
  std::string msg = lastErrorText();
  CHECK(msg.find("NCCL_BUFFSIZE") != std::string::npos);
  CHECK(msg.find(user + ":2") != std::string::npos);
  CHECK(msg.find("allowed") != std::string::npos);
}

TEST_CASE("a bad choice lists the allowed values") {
  ConfFixture f;
  std::string user = f.write("/user.conf", "NCCL_P2P_LEVEL=FAR\n");
  setenv("NCCL_CONF_FILE", user.c_str(), 1);
  env::reloadForTesting("/nonexistent/nccl.conf");
  REQUIRE(env::validateAll() == ncclInvalidArgument);
  std::string msg = lastErrorText();
  CHECK(msg.find("NCCL_P2P_LEVEL") != std::string::npos);
  CHECK(msg.find("LOC,NVL,PIX,PXB,PHB,SYS") != std::string::npos);
}

TEST_CASE("out-of-range numbers from the environment are errors too") {
  ConfFixture f;
  setenv("NCCL_MAX_NCHANNELS", "1000", 1);
  env::reloadForTesting("/nonexistent/nccl.conf");
  REQUIRE(env::validateAll() == ncclInvalidArgument);
  CHECK(std::string(lastErrorText()).find("1..64") != std::string::npos);
}

TEST_CASE("typos in a file or the environment get the nearest known name") {
  ConfFixture f;
  std::string user = f.write("/user.conf", "NCCL_MAX_NCHANELS=4\nNCCL_SOMETHING_ELSE_ENTIRELY=1\nbroken line\n");
  setenv("NCCL_CONF_FILE", user.c_str(), 1);
  setenv("NCCL_BUFFLE_SIZE", "1M", 1);
  env::reloadForTesting("/nonexistent/nccl.conf");
  std::vector<std::string> problems = env::configProblems();
  CHECK(mentions(problems, "NCCL_MAX_NCHANELS (" + user + ":1)", "did you mean NCCL_MAX_NCHANNELS"));
  CHECK(mentions(problems, "NCCL_BUFFLE_SIZE", "did you mean NCCL_BUFFSIZE"));
  CHECK(mentions(problems, "NCCL_SOMETHING_ELSE_ENTIRELY", "not used by gyre"));
  CHECK(mentions(problems, user + ":3", "expected NAME=VALUE"));
  CHECK(env::validateAll() == ncclSuccess);  // unknown names warn; they do not fail init
}
