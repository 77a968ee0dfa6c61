#include "report/reports_tree.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

namespace mlbench::report {
namespace fs = std::filesystem;

namespace {
double number_at(const nlohmann::json& j, const char* a, const char* b) {
  if (!j.is_object() || !j.contains(a) || !j[a].is_object() || !j[a].contains(b)) return kNaN;
  const nlohmann::json& v = j[a][b];
  return v.is_number() ? v.get<double>() : kNaN;
}

// "<suite>.<name>.R<run>.D<slot>[.FAIL].<ts>.json" -> name, when the file is one of `suite`'s.
std::string bench_from_file_name(const std::string& file, const std::string& suite) {
  const std::string prefix = suite + ".";
  if (file.rfind(prefix, 0) != 0) return {};
  static const std::regex rest(R"(^(.+)\.R\d+\.D\d+(\.FAIL)?\..*\.json$)");
  std::smatch m;
  const std::string tail = file.substr(prefix.size());
  return std::regex_match(tail, m, rest) ? m[1].str() : std::string();
}

// Why a report's train_item.avg gives no speed: "no train_item.avg", "train_item.avg is 0
// (not a positive number)", "train_item.avg is "fast" (not a number)".
std::string items_reason(const nlohmann::json& report) {
  if (!report.contains("train_item") || !report["train_item"].is_object() || !report["train_item"].contains("avg")) {
    return "no train_item.avg";
  }
  const nlohmann::json& v = report["train_item"]["avg"];
  std::string shown = v.dump();
  if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
  return fmt::format("train_item.avg is {} ({})", shown, v.is_number() ? "not a positive number" : "not a number");
}

int slot_from_file_name(const std::string& file) {
  static const std::regex slot(R"(\.D(\d+)[.])");
  std::smatch m;
  return std::regex_search(file, m, slot) ? std::stoi(m[1].str()) : 0;
}
}  // namespace

int run_number(const std::string& dir_name) {
  static const std::regex pattern(R"(^(R|output)(\d{1,6})$)");
  std::smatch m;
  return std::regex_match(dir_name, m, pattern) ? std::stoi(m[2].str()) : -1;
}

Instance parse_instance(const nlohmann::json& report, const std::string& file_name) {
  Instance i;
  i.file = file_name;
  i.slot = report.contains("jr_id") && report["jr_id"].is_number_integer() ? report["jr_id"].get<int>()
                                                                           : slot_from_file_name(file_name);
  i.items_per_s = number_at(report, "train_item", "avg");
  i.stall_pct = number_at(report, "stall", "stall_pct");
  if (report.contains("stall") && report["stall"].is_object()) {
    const nlohmann::json& st = report["stall"];
    i.wait_s = number_at(st, "wait", "avg");
    i.h2d_s = number_at(st, "h2d", "avg");
    i.compute_s = number_at(st, "compute", "avg");
  }
  const bool completed =
      report.contains("completed") && report["completed"].is_boolean() && report["completed"].get<bool>();
  bool nan_loss = false;
  if (report.contains("batch_loss") && report["batch_loss"].is_array()) {
    for (const nlohmann::json& v : report["batch_loss"]) {
      if (v.is_null() || (v.is_number() && !std::isfinite(v.get<double>()))) nan_loss = true;
    }
  }
  const std::string reason =
      report.contains("reason") && report["reason"].is_string() ? report["reason"].get<std::string>() : "";
  if (file_name.find(".FAIL.") != std::string::npos) {
    i.failed = true;
    i.reason = reason.empty() ? "FAIL report" : reason;
  } else if (!completed) {
    i.failed = true;
    i.reason = reason.empty() ? "completed is not true" : reason;
  } else if (nan_loss) {
    i.failed = true;
    i.reason = "NaN in batch_loss";
  } else if (!(std::isfinite(i.items_per_s) && i.items_per_s > 0.0)) {
    i.failed = true;
    i.reason = items_reason(report);
  }
  return i;
}

ReportsTree load_reports_tree(const fs::path& dir, const std::string& suite, int min_runs, const std::string& flag) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(fmt::format("{} {}: not a directory", flag, dir.string()));
  std::vector<std::pair<int, fs::path>> run_dirs;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (!e.is_directory()) continue;
    const int k = run_number(e.path().filename().string());
    if (k >= 0) run_dirs.emplace_back(k, e.path());
  }
  if (run_dirs.empty()) {
    throw InputError(
        fmt::format("{} {}: no run directories (R0, R1, ... or output0, output1, ...) in it", flag, dir.string()));
  }
  std::sort(run_dirs.begin(), run_dirs.end());

  ReportsTree tree;
  for (const auto& [k, run_dir] : run_dirs) {
    const std::string run = run_dir.filename().string();
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(run_dir)) {
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    bool any = false;
    for (const fs::path& file : files) {
      const std::string fname = file.filename().string();
      nlohmann::json j;
      {
        std::ifstream in(file);
        j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      }
      if (j.is_discarded()) {
        ++tree.notes.unreadable;
        const std::string bench = bench_from_file_name(fname, suite);
        if (bench.empty()) {
          tree.notes.warnings.push_back(fmt::format("{}/{}: not valid JSON, ignored", run, fname));
          continue;
        }
        // A report of this suite that cannot be read is a failed instance, not a silent gap.
        tree.notes.warnings.push_back(
            fmt::format("{}/{}: not valid JSON, counted as a failure of {}", run, fname, bench));
        Instance i;
        i.file = fname;
        i.slot = slot_from_file_name(fname);
        i.failed = true;
        i.reason = "unreadable report";
        BenchInput& b = tree.benches[bench];
        b.name = bench;
        if (b.runs.empty() || b.runs.back().run != run) b.runs.push_back({run, {}});
        b.runs.back().instances.push_back(i);
        any = true;
        continue;
      }
      if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("suite") ||
          !j["suite"].is_string()) {
        ++tree.notes.not_reports;
        continue;
      }
      if (j["suite"].get<std::string>() != suite) {
        ++tree.notes.other_suite;
        continue;
      }
      const std::string bench = j["name"].get<std::string>();
      BenchInput& b = tree.benches[bench];
      b.name = bench;
      if (b.runs.empty() || b.runs.back().run != run) b.runs.push_back({run, {}});
      b.runs.back().instances.push_back(parse_instance(j, fname));
      any = true;
    }
    if (any) tree.runs.push_back(run);
  }
  if (static_cast<int>(tree.runs.size()) < min_runs) {
    std::string listed;
    for (const std::string& r : tree.runs) listed += (listed.empty() ? "" : ", ") + r;
    throw InputError(fmt::format(
        "{} {}: found {} run(s) with reports of suite '{}'{}; at least {} are needed (--min-runs lowers it)", flag,
        dir.string(), tree.runs.size(), suite, listed.empty() ? "" : " (" + listed + ")", min_runs));
  }
  return tree;
}

}  // namespace mlbench::report
