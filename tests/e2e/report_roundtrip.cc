// Checks that the typed record (core/instance_report.h) holds each report it is given: for every
// file, to_json(parse_instance_report(j)) has every field of j with its value, and writing it
// again changes nothing. Prints the first field lost or changed per file; exit 1 if any.
// Usage: report_roundtrip REPORT.json...
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/instance_report.h"

namespace {

using nlohmann::json;

// The first path of `want` that `got` lacks or holds with another value ("" when none).
std::string first_difference(const json& want, const json& got, const std::string& path) {
  if (want.is_object()) {
    if (!got.is_object()) return path.empty() ? "(the report)" : path;
    for (const auto& [k, v] : want.items()) {
      const std::string at = path.empty() ? k : path + "." + k;
      if (!got.contains(k)) return at + " (lost)";
      if (std::string d = first_difference(v, got[k], at); !d.empty()) return d;
    }
    return "";
  }
  if (want.is_array()) {
    if (!got.is_array() || got.size() != want.size()) return path + " (another length)";
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (std::string d = first_difference(want[i], got[i], path + "[" + std::to_string(i) + "]"); !d.empty()) return d;
    }
    return "";
  }
  return want == got ? "" : path + ": " + want.dump() + " became " + got.dump();
}

}  // namespace

int main(int argc, char** argv) {
  int bad = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i]);
    const json j = json::parse(in);
    const json once = mlbench::core::to_json(mlbench::core::parse_instance_report(j));
    std::string d = first_difference(j, once, "");
    if (d.empty() && mlbench::core::to_json(mlbench::core::parse_instance_report(once)) != once) d = "a second write differs";
    if (!d.empty()) {
      std::cout << "FAIL: " << argv[i] << ": " << d << "\n";
      ++bad;
    }
  }
  std::cout << argc - 1 << " reports through the typed record: " << bad << " lost a field\n";
  return bad ? 1 : 0;
}
