// log_dir.h — a temporary folder for the ranks' NCCL_DEBUG_FILE logs, so a test
// can check what gyre logged (a refusal at WARN, the address a rank listens on).
#ifndef GYRE_TESTS_SUPPORT_LOG_DIR_H_
#define GYRE_TESTS_SUPPORT_LOG_DIR_H_

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gyre::test {

class LogDir {
 public:
  LogDir() {
    char pattern[] = "/tmp/gyre-logs-XXXXXX";
    if (mkdtemp(pattern)) path_ = pattern;
  }
  ~LogDir() {
    for (const std::string& f : files()) unlink(f.c_str());
    if (!path_.empty()) rmdir(path_.c_str());
  }
  LogDir(const LogDir&) = delete;
  LogDir& operator=(const LogDir&) = delete;

  bool ok() const { return !path_.empty(); }
  // For NCCL_DEBUG_FILE: one file per process.
  std::string pattern() const { return path_ + "/%p.log"; }
  std::string fileOf(pid_t pid) const { return path_ + "/" + std::to_string(pid) + ".log"; }

  std::vector<std::string> files() const {
    std::vector<std::string> out;
    if (DIR* d = path_.empty() ? nullptr : opendir(path_.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') out.push_back(path_ + "/" + e->d_name);
      closedir(d);
    }
    return out;
  }

  // Every line of every process's log that contains all of `needles`.
  std::vector<std::string> linesWith(const std::vector<std::string>& needles) const {
    std::vector<std::string> out;
    for (const std::string& f : files()) {
      std::ifstream in(f);
      for (std::string line; std::getline(in, line);) {
        bool all = true;
        for (const std::string& n : needles) all = all && line.find(n) != std::string::npos;
        if (all) out.push_back(line);
      }
    }
    return out;
  }

  std::string allText() const {
    std::string out;
    for (const std::string& f : files()) {
      std::ifstream in(f);
      std::stringstream ss;
      ss << in.rdbuf();
      out += "--- " + f + "\n" + ss.str();
    }
    return out;
  }

 private:
  std::string path_;
};

}  // namespace gyre::test

#endif  // GYRE_TESTS_SUPPORT_LOG_DIR_H_
