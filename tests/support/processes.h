// Test support: what /proc says of processes, for tests that check that children
// die with their parent or are stopped (runner, mlbench-stall, scaling), and
// whether a child's log has reached a line (to signal it at a known point).
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace mlbench::testing_support {

// Processes whose parent is `parent` (not zombies).
inline std::set<int> children_of(pid_t parent) {
  std::set<int> kids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string n = e.path().filename().string();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream st(e.path() / "stat");
    std::string s;
    std::getline(st, s);
    const auto close = s.rfind(')');
    if (close == std::string::npos) continue;
    char state;
    int ppid = 0;
    if (std::sscanf(s.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent && state != 'Z') {
      kids.insert(std::stoi(n));
    }
  }
  return kids;
}

// Whether `pid` exists and is not a zombie.
inline bool alive(int pid) {
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(st, s)) return false;
  const auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && s[close + 2] != 'Z';
}

// Whether the file `log` has a line that starts with `prefix` (false while it does not exist).
inline bool log_has_line(const std::filesystem::path& log, const std::string& prefix) {
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace mlbench::testing_support
