// The recording profiler plugin's lines (test_profiler_plugin.cc) as
// events: each start with its parent, rank and fields, where it stopped,
// the states recorded on it. Shared by the observe tests that read them.
#pragma once

#include <cstdint>
#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace gyre::test {

struct Ev {
  int id = 0, parent = 0;
  std::string kind;
  std::map<std::string, std::string> fields;
  int startAt = -1, stopAt = -1, stops = 0;
  std::vector<std::pair<int, std::string>> states;  // state number, " bytes=N" or ""
};

inline std::map<int, Ev> parseEvents(const std::vector<std::string>& lines, std::vector<int>* order) {
  std::map<int, Ev> events;
  std::regex start("start ([0-9]+) parent=([0-9]+) rank=(-?[0-9]+) ([A-Za-z0-9]+)(.*)");
  std::regex stop("stop ([0-9]+).*");
  std::regex state("state ([0-9]+) ([0-9]+)(.*)");
  std::regex field(" ([A-Za-z]+)=([^ ]*)");
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    std::smatch m;
    if (std::regex_match(lines[i], m, start)) {
      Ev& e = events[std::stoi(m[1])];
      e.id = std::stoi(m[1]);
      e.parent = std::stoi(m[2]);
      e.kind = m[4];
      e.fields["rank"] = m[3];
      const std::string rest = m[5];
      for (std::sregex_iterator it(rest.begin(), rest.end(), field), end; it != end; ++it) e.fields[(*it)[1]] = (*it)[2];
      e.startAt = i;
      order->push_back(e.id);
    } else if (std::regex_match(lines[i], m, state)) {
      events[std::stoi(m[1])].states.push_back({std::stoi(m[2]), m[3]});
    } else if (std::regex_match(lines[i], m, stop)) {
      Ev& e = events[std::stoi(m[1])];
      e.stopAt = i;
      e.stops += 1;
    }
  }
  return events;
}

inline std::vector<const Ev*> ofKind(const std::map<int, Ev>& events, const std::vector<int>& order, const std::string& kind) {
  std::vector<const Ev*> out;
  for (int id : order)
    if (events.at(id).kind == kind) out.push_back(&events.at(id));
  return out;
}

inline std::vector<const Ev*> childrenOf(const std::map<int, Ev>& events, const std::vector<int>& order, int parent,
                                         const std::string& kind) {
  std::vector<const Ev*> out;
  for (int id : order)
    if (events.at(id).parent == parent && events.at(id).kind == kind) out.push_back(&events.at(id));
  return out;
}

inline int64_t field(const Ev& e, const std::string& name) { return std::stoll(e.fields.at(name)); }

}  // namespace gyre::test
