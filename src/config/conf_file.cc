#include "src/config/conf_file.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gyre::env {
namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

bool validName(const std::string& n) {
  if (n.empty() || isdigit(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace

std::vector<ConfEntry> parseConfText(const std::string& text, const std::string& origin,
                                     std::vector<std::string>* problems) {
  std::vector<ConfEntry> out;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    std::string s = trim(raw);
    if (s.empty() || s[0] == '#') continue;
    size_t eq = s.find('=');
    std::string name = trim(s.substr(0, eq == std::string::npos ? s.size() : eq));
    if (eq == std::string::npos || !validName(name)) {
      problems->push_back(origin + ":" + std::to_string(line) + ": ignored \"" + s +
                          "\" (expected NAME=VALUE or a # comment)");
      continue;
    }
    std::string value = trim(s.substr(eq + 1));
    if (value.size() >= 2 && (value[0] == '"' || value[0] == '\'') && value.back() == value[0])
      value = value.substr(1, value.size() - 2);
    out.push_back({name, value, line});
  }
  return out;
}

bool readConfFile(const std::string& path, std::vector<ConfEntry>* out, std::vector<std::string>* problems) {
  std::ifstream in(path);
  if (!in) {
    if (errno != ENOENT) problems->push_back(path + ": cannot be read (" + strerror(errno) + ")");
    return false;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  *out = parseConfText(buf.str(), path, problems);
  return true;
}

}  // namespace gyre::env
