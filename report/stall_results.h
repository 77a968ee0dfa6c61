// Finds mlbench-stall's results (DIR/stall.json with split.svg and whatif.svg
// beside it) so the report can show each benchmark's fetch/prep split and embed
// the analyzer's charts.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report_model.h"

namespace mlbench::report {

// {"bench": NAME, "split": {"compute_pct","prep_pct","fetch_pct"}, "rates": {...}}.
// Throws InputError naming `source` and the missing field.
StallAnalysis parse_stall_json(const nlohmann::json& j, const std::string& source);

// Every stall.json under each root (a root may be a stall.json itself), sorted, once each.
std::vector<std::filesystem::path> find_stall_files(const std::vector<std::filesystem::path>& roots);

// Every stall.json under each root (recursively), keyed by benchmark; when two
// name the same benchmark the one found last (by path order) wins and a warning
// is added. Unreadable files add a warning and are skipped.
std::map<std::string, StallAnalysis> find_stall_analyses(const std::vector<std::filesystem::path>& roots,
                                                         std::vector<std::string>& warnings);

}  // namespace mlbench::report
