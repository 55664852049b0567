// nccl.conf: settings written one per line as NAME=VALUE, read from
// /etc/nccl.conf and then from the user's file (NCCL_CONF_FILE, else
// ~/.nccl.conf), later files and then the environment taking precedence.
//
//   # comment lines start with '#'; blank lines are ignored
//   NCCL_DEBUG=INFO
//   NCCL_BUFFSIZE = 8M          spaces around '=' are allowed
//   NCCL_SOCKET_IFNAME="eth0"   so are matching quotes around the value
#pragma once

#include <string>
#include <vector>

namespace gyre::env {

struct ConfEntry {
  std::string name;
  std::string value;
  int line = 0;
};

// Parses the text of one file. Lines that are not comments, blank or
// NAME=VALUE are skipped and described in `problems` as "origin:line: ...".
std::vector<ConfEntry> parseConfText(const std::string& text, const std::string& origin,
                                     std::vector<std::string>* problems);

// Reads and parses a file. A missing file is normal (returns false, no
// problem); an unreadable one is reported in `problems`.
bool readConfFile(const std::string& path, std::vector<ConfEntry>* out, std::vector<std::string>* problems);

}  // namespace gyre::env
