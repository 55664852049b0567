// One home for configuration: every NCCL_* / GYRE_* variable gyre reads is
// declared once in env_registry.cc (name, type, default, allowed values,
// description). Values are read once per process from the environment and
// from nccl.conf files (conf_file.h; environment over user file over
// /etc/nccl.conf over the default), validated at communicator init, and looked
// up here by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "include/gyre.h"

namespace gyre::env {

enum class Type { Int, Bytes, String, Choice };

struct VarSpec {
  const char* name;
  Type type;
  const char* defaultValue;  // as it would be written in the environment
  const char* allowed;       // Choice: comma list; Int/Bytes: "min..max"; String: free text
  const char* description;
  int64_t min = 0;
  int64_t max = INT64_MAX;
};

// All declared variables, in declaration order.
const std::vector<VarSpec>& registry();
const VarSpec* find(const std::string& name);

// Raw effective text of a declared variable: the environment's value at first
// use, else a config file's, else its default. Never fails (logging needs it
// before validation).
std::string getString(const char* name);

enum class Source { Default, File, Env };
const char* sourceName(Source s);  // "default", "file", "env"

struct Setting {
  std::string value;
  Source source = Source::Default;
  std::string origin;  // "environment", "/etc/nccl.conf:3", or "" for defaults
};

// The effective value of a declared variable and where it came from.
Setting lookup(const char* name);
// Set by the environment or a config file to something (not left at its default).
bool isSet(const Setting& s);
// Where a set value came from, for messages: "environment" or "FILE:LINE".
std::string originOf(const Setting& s);

// Config files that existed and were read, lowest precedence first.
std::vector<std::string> configFilesRead();

// What validateAll() warns about: malformed config lines and unknown names
// (with the nearest known name when one is close), one message each.
std::vector<std::string> configProblems();

// Re-reads the environment and config files, as at first use (tests only: not
// safe while other threads read settings). `systemConf` replaces
// /etc/nccl.conf so tests do not depend on the machine.
void reloadForTesting(const std::string& systemConf = "/etc/nccl.conf");

// Validated numeric value of an Int or Bytes variable.
ncclResult_t getInt(const char* name, int64_t* out);

// Checks every declared variable that is set; the first bad value is an
// ncclInvalidArgument naming the variable, where it was set and what it
// allows. Unknown NCCL_* and GYRE_* names (in the environment or a config
// file) and malformed config lines are warned about once, unknown names with
// the nearest known name.
ncclResult_t validateAll();

// Parses "4194304", "4M", "64K", "1G" (powers of 1024). False if malformed.
bool parseBytes(const std::string& text, int64_t* out);

// The declared name closest to `name` by edit distance, or "" if none is close.
std::string nearestName(const std::string& name);

}  // namespace gyre::env
