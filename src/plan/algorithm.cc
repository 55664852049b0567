#include "src/plan/algorithm.h"

#include <strings.h>

#include <algorithm>

#include "src/debug/error.h"

namespace gyre {

const char* algorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::Ring: return "Ring";
    case Algorithm::Tree: return "Tree";
    case Algorithm::Direct: return "Direct";
  }
  return "?";
}

Algorithm algorithmNamed(const std::string& name) {
  if (name == "Tree") return Algorithm::Tree;
  if (name == "Direct") return Algorithm::Direct;
  return Algorithm::Ring;
}

const std::vector<std::string>& algorithmNames() {
  static const std::vector<std::string> names = {"Ring", "Tree", "Direct"};
  return names;
}
const char* protocolName(Protocol p) { return p == Protocol::Simple ? "Simple" : "LL"; }

ncclResult_t parseSelection(const char* variable, const std::string& spec, const std::vector<std::string>& known,
                            std::vector<std::string>* allowed) {
  std::string knownList;
  for (const std::string& k : known) knownList += (knownList.empty() ? "" : ",") + k;
  if (spec.empty()) {
    *allowed = known;
    return ncclSuccess;
  }
  bool exclude = spec[0] == '^';
  std::vector<std::string> named;
  size_t pos = exclude ? 1 : 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) {
      auto it = std::find_if(known.begin(), known.end(),
                             [&](const std::string& k) { return strcasecmp(k.c_str(), item.c_str()) == 0; });
      if (it == known.end())
        return fail(ncclInvalidArgument, "%s=\"%s\": unknown name \"%s\"; available: %s", variable, spec.c_str(),
                    item.c_str(), knownList.c_str());
      named.push_back(*it);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  allowed->clear();
  for (const std::string& k : known) {
    bool listed = std::find(named.begin(), named.end(), k) != named.end();
    if (listed != exclude) allowed->push_back(k);
  }
  if (allowed->empty())
    return fail(ncclInvalidArgument, "%s=\"%s\" leaves no usable choice; available: %s", variable, spec.c_str(),
                knownList.c_str());
  return ncclSuccess;
}

}  // namespace gyre
