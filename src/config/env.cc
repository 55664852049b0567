#include "src/config/env.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <strings.h>

#include "src/debug/error.h"
#include "src/debug/log.h"

extern char** environ;

namespace gyre::env {
namespace {

// Snapshot of the environment taken at first use, so every reader in the
// process sees the same values even if the program later calls setenv().
const std::map<std::string, std::string>& snapshot() {
  static const std::map<std::string, std::string> values = [] {
    std::map<std::string, std::string> m;
    for (const VarSpec& v : registry())
      if (const char* s = getenv(v.name)) m[v.name] = s;
    return m;
  }();
  return values;
}

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool parseInt(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool choiceAllowed(const VarSpec& spec, const std::string& value) {
  std::string list = spec.allowed;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (strcasecmp(item.c_str(), value.c_str()) == 0) return true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return false;
}

void warnUnknownNamesOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (char** e = environ; e && *e; ++e) {
      std::string entry = *e;
      std::string name = entry.substr(0, entry.find('='));
      if (name.rfind("NCCL_", 0) != 0 && name.rfind("GYRE_", 0) != 0) continue;
      if (find(name)) continue;
      std::string near = nearestName(name);
      if (!near.empty())
        GYRE_WARN("%s is not a setting gyre knows; did you mean %s?", name.c_str(), near.c_str());
      else
        GYRE_INFO("INIT", "%s is not used by gyre; ignored", name.c_str());
    }
  });
}

}  // namespace

const VarSpec* find(const std::string& name) {
  for (const VarSpec& v : registry())
    if (name == v.name) return &v;
  return nullptr;
}

std::string getString(const char* name) {
  auto it = snapshot().find(name);
  if (it != snapshot().end()) return it->second;
  const VarSpec* spec = find(name);
  return spec ? spec->defaultValue : "";
}

bool parseBytes(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  std::string digits = text;
  int64_t scale = 1;
  switch (toupper(static_cast<unsigned char>(digits.back()))) {
    case 'K': scale = int64_t{1} << 10; break;
    case 'M': scale = int64_t{1} << 20; break;
    case 'G': scale = int64_t{1} << 30; break;
    default: break;
  }
  if (scale != 1) digits.pop_back();
  int64_t v = 0;
  if (!parseInt(digits, &v) || v < 0 || v > INT64_MAX / scale) return false;
  *out = v * scale;
  return true;
}

ncclResult_t getInt(const char* name, int64_t* out) {
  const VarSpec* spec = find(name);
  if (!spec) return fail(ncclInternalError, "setting %s is not declared in the registry", name);
  std::string text = getString(name);
  int64_t v = 0;
  bool ok = spec->type == Type::Bytes ? parseBytes(text, &v) : parseInt(text, &v);
  if (!ok || v < spec->min || v > spec->max)
    return fail(ncclInvalidArgument, "%s=\"%s\" is not valid; allowed: %s (%s)", name, text.c_str(),
                spec->allowed, spec->description);
  *out = v;
  return ncclSuccess;
}

ncclResult_t validateAll() {
  warnUnknownNamesOnce();
  for (const VarSpec& spec : registry()) {
    if (!snapshot().count(spec.name)) continue;
    const std::string& value = snapshot().at(spec.name);
    switch (spec.type) {
      case Type::Int:
      case Type::Bytes: {
        int64_t ignored;
        GYRE_CHECK(getInt(spec.name, &ignored));
        break;
      }
      case Type::Choice:
        if (!value.empty() && !choiceAllowed(spec, value))
          return fail(ncclInvalidArgument, "%s=\"%s\" is not valid; allowed: %s", spec.name, value.c_str(),
                      spec.allowed);
        break;
      case Type::String: break;
    }
  }
  return ncclSuccess;
}

std::string nearestName(const std::string& name) {
  std::string best;
  size_t bestDistance = 4;  // farther than this is a different word, not a typo
  for (const VarSpec& v : registry()) {
    size_t d = editDistance(name, v.name);
    if (d < bestDistance) {
      bestDistance = d;
      best = v.name;
    }
  }
  return best;
}

}  // namespace gyre::env
