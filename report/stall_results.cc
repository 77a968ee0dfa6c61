#include "report/stall_results.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "report/reports_tree.h"

namespace mlbench::report {
namespace fs = std::filesystem;

namespace {
std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

double pct(const nlohmann::json& split, const char* key, const std::string& source) {
  if (!split.contains(key) || !split[key].is_number()) {
    throw InputError(fmt::format("{}: split.{} is missing or not a number", source, key));
  }
  return split[key].get<double>();
}
}  // namespace

StallAnalysis parse_stall_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object() || !j.contains("bench") || !j["bench"].is_string()) {
    throw InputError(fmt::format("{}: no \"bench\" name", source));
  }
  if (!j.contains("split") || !j["split"].is_object()) throw InputError(fmt::format("{}: no \"split\" object", source));
  StallAnalysis a;
  a.bench = j["bench"].get<std::string>();
  a.compute_pct = pct(j["split"], "compute_pct", source);
  a.prep_pct = pct(j["split"], "prep_pct", source);
  a.fetch_pct = pct(j["split"], "fetch_pct", source);
  if (j.contains("rates")) a.rates = j["rates"];
  if (j.contains("self_check") && j["self_check"].is_object()) a.self_check = j["self_check"];
  if (const auto& rec = j.value("recommendation", nlohmann::json()); rec.is_object()) {
    if (rec.value("verdict", nlohmann::json()).is_string()) a.verdict = rec["verdict"].get<std::string>();
    if (rec.value("remedy_text", nlohmann::json()).is_string()) a.remedy_text = rec["remedy_text"].get<std::string>();
    for (const auto& line : rec.value("advice", nlohmann::json::array())) {
      if (line.is_string()) a.advice.push_back(line.get<std::string>());
    }
  }
  return a;
}

std::map<std::string, StallAnalysis> find_stall_analyses(const std::vector<fs::path>& roots,
                                                         std::vector<std::string>& warnings) {
  std::vector<fs::path> files;
  for (const fs::path& root : roots) {
    std::error_code ec;
    if (fs::is_regular_file(root, ec) && root.filename() == "stall.json") {
      files.push_back(root);
      continue;
    }
    if (!fs::is_directory(root, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it->is_regular_file() && it->path().filename() == "stall.json") files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  std::map<std::string, StallAnalysis> out;
  for (const fs::path& file : files) {
    const nlohmann::json j = nlohmann::json::parse(read_text(file), nullptr, false);
    if (j.is_discarded()) {
      warnings.push_back(fmt::format("{}: not valid JSON, ignored", file.string()));
      continue;
    }
    try {
      StallAnalysis a = parse_stall_json(j, file.string());
      a.dir = file.parent_path().string();
      a.split_svg = read_text(file.parent_path() / "split.svg");
      a.whatif_svg = read_text(file.parent_path() / "whatif.svg");
      if (out.count(a.bench)) {
        warnings.push_back(fmt::format("{}: a second stall analysis of {} (using this one, not {})", file.string(),
                                       a.bench, out[a.bench].dir));
      }
      out[a.bench] = std::move(a);
    } catch (const InputError& e) {
      warnings.push_back(std::string(e.what()) + ", ignored");
    }
  }
  return out;
}

}  // namespace mlbench::report
