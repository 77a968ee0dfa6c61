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

// A run's name in the report: the folder's own name ("R3", "output"), "." spelled out.
std::string run_name(const fs::path& run_dir) {
  const std::string name = run_dir.filename().string();
  return name.empty() || name == "." ? fs::absolute(run_dir).lexically_normal().parent_path().filename().string()
                                     : name;
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

ReportsInput reports_input_kind(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return ReportsInput::ReportFile;
  if (!fs::is_directory(path, ec)) return ReportsInput::Tree;  // the loader says what is wrong
  bool reports = false;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    if (e.is_directory(ec) && run_number(e.path().filename().string()) >= 0) return ReportsInput::Tree;
    if (e.is_regular_file(ec) && e.path().extension() == ".json" && e.path().filename() != "machine.json") {
      reports = true;
    }
  }
  return reports ? ReportsInput::RunDirectory : ReportsInput::Tree;
}

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
  if (report.contains("gpu_monitor") && report["gpu_monitor"].is_object()) {
    i.gpu_util_pct = number_at(report["gpu_monitor"].value("summary", nlohmann::json()), "util_pct", "mean");
  }
  if (report.contains("stall") && report["stall"].is_object()) {
    const nlohmann::json& st = report["stall"];
    i.wait_s = number_at(st, "wait", "avg");
    i.h2d_s = number_at(st, "h2d", "avg");
    i.compute_s = number_at(st, "compute", "avg");
    const double iteration_s = number_at(st, "iteration", "avg");
    if (report.contains("metrics") && report["metrics"].is_object() &&
        report["metrics"].contains("allreduce_exposed_s") && report["metrics"]["allreduce_exposed_s"].is_number() &&
        iteration_s > 0.0) {
      i.allreduce_pct = 100.0 * report["metrics"]["allreduce_exposed_s"].get<double>() / iteration_s;
    }
  }
  if (report.contains("machine") && report["machine"].is_object() && report["machine"].contains("blas") &&
      report["machine"]["blas"].is_object() && report["machine"]["blas"].contains("name") &&
      report["machine"]["blas"]["name"].is_string()) {
    i.blas = report["machine"]["blas"]["name"].get<std::string>();
  }
  i.observation_s = number_at(report, "train", "avg");
  i.cpu_per_item_us = number_at(report, "process_cpu", "per_item_us");
  // Newer reports only (docs/report-format.md); absent means "not recorded".
  auto num = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && o[k].is_number() ? o[k].get<double>() : kNaN;
  };
  auto flag = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && o[k].is_boolean() && o[k].get<bool>();
  };
  if (report.contains("stability") && report["stability"].is_object()) {
    const nlohmann::json& st = report["stability"];
    Stability s;
    s.observations =
        st.contains("observations") && st["observations"].is_number_integer() ? st["observations"].get<int>() : 0;
    s.sd_pct = num(st, "sd_pct");
    s.median_s = num(st, "median_s");
    s.trend_pct = num(st, "trend_pct");
    s.warmup_trending = flag(st, "warmup_trending");
    s.short_observations = flag(st, "short_observations");
    i.stability = s;
  }
  if (report.contains("interference") && report["interference"].is_object()) {
    const nlohmann::json& in = report["interference"];
    i.interference = Interference{num(in, "other_cpu_pct"), num(in, "steal_pct"), num(in, "probe_before_s"),
                                  num(in, "probe_after_s"), num(in, "probe_drift_pct"),
                                  num(in, "parallel_probe_before_s"), num(in, "parallel_probe_after_s")};
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
  // One report file, or one run directory (mlbench-run without --repeat-suite), is one run.
  const ReportsInput input = reports_input_kind(dir);
  const std::string only_file = input == ReportsInput::ReportFile ? dir.filename().string() : "";
  if (input == ReportsInput::Tree && !fs::is_directory(dir, ec)) {
    throw InputError(fmt::format("{} {}: not a directory", flag, dir.string()));
  }
  std::vector<std::pair<int, fs::path>> run_dirs;
  if (input == ReportsInput::Tree) {
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      if (!e.is_directory()) continue;
      const int k = run_number(e.path().filename().string());
      if (k >= 0) run_dirs.emplace_back(k, e.path());
    }
  } else if (input == ReportsInput::ReportFile) {
    run_dirs.emplace_back(0, dir.parent_path().empty() ? fs::path(".") : dir.parent_path());
  } else if (input == ReportsInput::RunDirectory) {
    run_dirs.emplace_back(0, dir);
  }
  if (run_dirs.empty()) {
    throw InputError(fmt::format(
        "{} {}: no run directories (R0, R1, ... or output0, output1, ...) nor instance reports in it", flag,
        dir.string()));
  }
  std::sort(run_dirs.begin(), run_dirs.end());

  ReportsTree tree;
  for (const auto& [k, run_dir] : run_dirs) {
    const std::string run = run_name(run_dir);
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(run_dir)) {
      if (!only_file.empty() && e.path().filename() != only_file) continue;
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
      const bool not_report = j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string() ||
                              !j.contains("suite") || !j["suite"].is_string();
      // A file named as a report of this suite that cannot be read as one is a failed
      // instance, listed by name, not a silent gap (valid JSON that is no report object included).
      if (const std::string bench = not_report ? bench_from_file_name(fname, suite) : ""; !bench.empty()) {
        const char* what = j.is_discarded() ? "not valid JSON" : "not a report object";
        ++(j.is_discarded() ? tree.notes.unreadable : tree.notes.not_reports);
        tree.notes.warnings.push_back(fmt::format("{}/{}: {}, counted as a failure of {}", run, fname, what, bench));
        Instance i;
        i.file = fname;
        i.slot = slot_from_file_name(fname);
        i.failed = true;
        i.reason = std::string("unreadable report (") + what + ")";
        BenchInput& b = tree.benches[bench];
        b.name = bench;
        if (b.runs.empty() || b.runs.back().run != run) b.runs.push_back({run, {}});
        b.runs.back().instances.push_back(i);
        any = true;
        continue;
      }
      if (j.is_discarded()) {
        ++tree.notes.unreadable;
        tree.notes.warnings.push_back(fmt::format("{}/{}: not valid JSON, ignored", run, fname));
        continue;
      }
      if (not_report) {
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
      Instance inst = parse_instance(j, fname);
      // No training loop reaches this rate: a corrupt value must not silently become the result.
      if (!inst.failed && inst.items_per_s > kImplausibleItemsPerS) {
        inst.failed = true;
        inst.reason = fmt::format("implausible train_item.avg {:g} items/s", inst.items_per_s);
        tree.notes.warnings.push_back(fmt::format("{}/{}: {}, counted as a failure", run, fname, inst.reason));
      }
      b.runs.back().instances.push_back(inst);
      any = true;
    }
    if (any) tree.runs.push_back(run);
  }
  // A single run was asked for by name: it is read whatever --min-runs says (the caller notes it).
  if (input != ReportsInput::Tree && tree.runs.empty()) {
    throw InputError(fmt::format("--reports {}: holds no report of suite '{}'", dir.string(), suite));
  }
  if (input == ReportsInput::Tree && static_cast<int>(tree.runs.size()) < min_runs) {
    std::string listed;
    for (const std::string& r : tree.runs) listed += (listed.empty() ? "" : ", ") + r;
    throw InputError(fmt::format(
        "{} {}: found {} run(s) with reports of suite '{}'{}; at least {} are needed (--min-runs lowers it)", flag,
        dir.string(), tree.runs.size(), suite, listed.empty() ? "" : " (" + listed + ")", min_runs));
  }
  return tree;
}

}  // namespace mlbench::report
