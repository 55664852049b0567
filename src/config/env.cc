#include "src/config/env.h"

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "src/config/conf_file.h"
#include "src/config/env_plugin.h"
#include "src/config/setting_values.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

extern char** environ;

namespace gyre::env {
namespace {

// Everything read at first use, so every reader in the process sees the same
// values even if the program later calls setenv() or edits a file. Nothing
// here may log: the logger itself reads settings while this is being built.
struct Snapshot {
  std::map<std::string, Setting> values;                          // declared names set by env or file
  std::vector<std::pair<std::string, std::string>> unknown;       // (name, origin) not declared
  std::vector<std::string> problems;                              // malformed config lines
  std::vector<std::string> files;                                 // config files read
  std::atomic<bool> warned{false};
};

std::string g_systemConf = "/etc/nccl.conf";

void readFile(const std::string& path, Snapshot* s) {
  std::vector<ConfEntry> entries;
  if (!readConfFile(path, &entries, &s->problems)) return;
  s->files.push_back(path);
  for (const ConfEntry& e : entries) {
    std::string origin = path + ":" + std::to_string(e.line);
    if (find(e.name)) s->values[e.name] = Setting{e.value, Source::File, origin};
    else s->unknown.emplace_back(e.name, origin);
  }
}

Snapshot* build() {
  auto* s = new Snapshot();
  readFile(g_systemConf, s);
  // NCCL_CONF_FILE only ever comes from the environment: it says which file to read.
  const char* userConf = getenv("NCCL_CONF_FILE");
  const char* home = getenv("HOME");
  if (userConf && *userConf) readFile(userConf, s);
  else if (home && *home) readFile(std::string(home) + "/.nccl.conf", s);
  // An env plugin answers every read in place of the environment, as in NCCL.
  const EnvPlugin& plugin = envPlugin();
  for (const VarSpec& v : registry()) {
    if (plugin.getEnv) {
      if (const char* e = plugin.getEnv(v.name)) s->values[v.name] = Setting{e, Source::Env, plugin.origin};
    } else if (const char* e = getenv(v.name)) {
      s->values[v.name] = Setting{e, Source::Env, "environment"};
    }
  }
  for (char** e = environ; e && *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if ((name.rfind("NCCL_", 0) == 0 || name.rfind("GYRE_", 0) == 0) && !find(name))
      s->unknown.emplace_back(name, "environment");
  }
  return s;
}

std::once_flag g_once;
// Never freed while in use: readers keep no reference past their call, and it
// is replaced only by reloadForTesting, which no thread may race (env.h).
Snapshot* g_snapshot = nullptr;

Snapshot& snapshot() {
  std::call_once(g_once, [] { g_snapshot = build(); });
  return *g_snapshot;
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

// " (from /etc/nccl.conf:3)" for file values, so a bad value is easy to find.
std::string whereSet(const char* name) {
  Setting s = lookup(name);
  return s.source == Source::File ? " (set in " + s.origin + ")" : "";
}

// Each message, and whether it deserves a warning: a typo (a close known
// name) or a malformed line does; an NCCL setting gyre does not implement is
// common in shared cluster environments and only noted at INFO.
std::vector<std::pair<bool, std::string>> problemList() {
  const Snapshot& s = snapshot();
  std::vector<std::pair<bool, std::string>> out;
  for (const std::string& p : s.problems) out.emplace_back(true, "config: " + p);
  for (const auto& [name, origin] : s.unknown) {
    std::string from = origin == "environment" ? "" : " (" + origin + ")";
    if (name.rfind("NCCL_", 0) != 0 && name.rfind("GYRE_", 0) != 0) {
      out.emplace_back(true, name + from + " is not an NCCL_ or GYRE_ setting; ignored");
      continue;
    }
    std::string near = nearestName(name);
    if (near.empty()) out.emplace_back(false, name + from + " is not used by gyre; ignored");
    else out.emplace_back(true, name + from + " is not a setting gyre knows; did you mean " + near + "?");
  }
  return out;
}

void warnOnce() {
  if (snapshot().warned.exchange(true)) return;
  // NCCL settings gyre does not implement get one WARN line together (a
  // program moved from NCCL should hear that they have no effect, without a
  // line for each of the many a cluster may set), and an INFO line each.
  std::string ignored;
  for (const std::string& w : envPlugin().warnings) GYRE_WARN("%s", w.c_str());
  for (const std::string& n : envPlugin().notes) GYRE_INFO("INIT", "%s", n.c_str());
  for (const auto& [serious, text] : problemList()) {
    if (serious) GYRE_WARN("%s", text.c_str());
    else GYRE_INFO("INIT", "%s", text.c_str());
  }
  for (const auto& [name, origin] : snapshot().unknown)
    if ((name.rfind("NCCL_", 0) == 0 || name.rfind("GYRE_", 0) == 0) && nearestName(name).empty())
      ignored += (ignored.empty() ? "" : ", ") + name;
  if (ignored.empty()) return;
  // A plugin reads its own NCCL_* settings (the example tuner's
  // NCCL_TUNER_CONFIG_FILE): with one asked for, these may well be in use,
  // and a warning would tell users their plugin's configuration is dead.
  std::string plugins;
  for (const char* kind : {"NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN"}) {
    const std::string value = getString(kind);
    if (!value.empty() && strcasecmp(value.c_str(), "none") != 0)
      plugins += (plugins.empty() ? "" : ", ") + std::string(kind) + "=" + value;
  }
  if (plugins.empty()) GYRE_WARN("gyre does not implement and ignores: %s", ignored.c_str());
  else GYRE_INFO("INIT", "not read by gyre itself, left to the plugins it loads (%s), which may read them: %s",
                 plugins.c_str(), ignored.c_str());
}

}  // namespace

const char* sourceName(Source s) {
  switch (s) {
    case Source::Env: return "env";
    case Source::File: return "file";
    default: return "default";
  }
}

const VarSpec* find(const std::string& name) {
  for (const VarSpec& v : registry())
    if (name == v.name) return &v;
  return nullptr;
}

Setting lookup(const char* name) {
  const Snapshot& s = snapshot();
  auto it = s.values.find(name);
  if (it != s.values.end()) return it->second;
  const VarSpec* spec = find(name);
  return Setting{spec ? spec->defaultValue : "", Source::Default, ""};
}

bool isSet(const Setting& s) { return s.source != Source::Default && !s.value.empty(); }

std::string originOf(const Setting& s) {
  return s.source == Source::Env && s.origin.empty() ? "environment" : s.origin;
}

std::string getString(const char* name) { return lookup(name).value; }

std::vector<std::string> configFilesRead() { return snapshot().files; }

std::vector<std::string> configProblems() {
  std::vector<std::string> out;
  for (const auto& [serious, text] : problemList()) out.push_back(text);
  return out;
}

void reloadForTesting(const std::string& systemConf) {
  snapshot();  // make sure the first build has happened, so call_once never overwrites ours
  g_systemConf = systemConf;
  Snapshot* old = g_snapshot;
  g_snapshot = build();
  delete old;
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

bool valueAllowed(const VarSpec& spec, const std::string& value, int64_t* number) {
  switch (spec.type) {
    case Type::Int:
    case Type::Bytes: {
      int64_t v = 0;
      const bool ok = spec.type == Type::Bytes ? parseBytes(value, &v) : parseInt(value, &v);
      if (!ok || v < spec.min || v > spec.max) return false;
      *number = v;
      return true;
    }
    case Type::Choice: return value.empty() || choiceAllowed(spec, value);
    case Type::String: return true;
  }
  return false;
}

ncclResult_t getInt(const char* name, int64_t* out) {
  const VarSpec* spec = find(name);
  if (!spec) return fail(ncclInternalError, "setting %s is not declared in the registry", name);
  std::string text = getString(name);
  int64_t v = 0;
  bool ok = spec->type == Type::Bytes ? parseBytes(text, &v) : parseInt(text, &v);
  if (!ok || v < spec->min || v > spec->max)
    return fail(ncclInvalidArgument, "%s=\"%s\"%s is not valid; allowed: %s (%s)", name, text.c_str(),
                whereSet(name).c_str(), spec->allowed, spec->description);
  *out = v;
  return ncclSuccess;
}

ncclResult_t validateAll() {
  warnOnce();
  for (const VarSpec& spec : registry()) {
    Setting s = lookup(spec.name);
    if (s.source == Source::Default) continue;
    switch (spec.type) {
      case Type::Int:
      case Type::Bytes: {
        int64_t ignored;
        GYRE_CHECK(getInt(spec.name, &ignored));
        break;
      }
      case Type::Choice:
        if (int64_t unused; !valueAllowed(spec, s.value, &unused))
          return fail(ncclInvalidArgument, "%s=\"%s\"%s is not valid; allowed: %s", spec.name, s.value.c_str(),
                      whereSet(spec.name).c_str(), spec.allowed);
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
