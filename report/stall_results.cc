#include "report/stall_results.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/stall_record.h"
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

}  // namespace

StallAnalysis parse_stall_json(const nlohmann::json& j, const std::string& source) {
  core::StallRecord r;
  try {
    r = core::parse_stall_record(j);
  } catch (const core::ReportFormatError& e) {
    throw InputError(fmt::format("{}: {}", source, e.what()));
  }
  StallAnalysis a;
  a.bench = r.bench;
  a.compute_pct = r.split.compute_pct;
  a.prep_pct = r.split.prep_pct;
  a.fetch_pct = r.split.fetch_pct;
  if (r.rates) a.rates = r.rates->raw;
  if (r.self_check) {
    a.self_check = r.self_check->raw;
    a.self_check_text = r.self_check->text;
  }
  if (r.recommendation) {
    a.verdict = r.recommendation->verdict;
    a.remedy_text = r.recommendation->remedy_text;
    a.advice = r.recommendation->advice;
  }
  if (j.contains("ranks") && j["ranks"].is_array() && j.contains("job") && j["job"].is_object()) {
    a.ranks = j["ranks"];
    a.job = j["job"];
  }
  return a;
}

std::vector<fs::path> find_stall_files(const std::vector<fs::path>& roots) {
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
  return files;
}

std::map<std::string, StallAnalysis> find_stall_analyses(const std::vector<fs::path>& roots,
                                                         std::vector<std::string>& warnings) {
  const std::vector<fs::path> files = find_stall_files(roots);
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
