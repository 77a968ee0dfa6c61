#include "report/reports_tree.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "core/instance_report.h"

namespace mlbench::report {
namespace fs = std::filesystem;

namespace {

// A run's name in the report: the folder's own name ("R3", "output"), "." spelled out.
std::string run_name(const fs::path& run_dir) {
  const std::string name = run_dir.filename().string();
  return name.empty() || name == "." ? fs::absolute(run_dir).lexically_normal().parent_path().filename().string()
                                     : name;
}

// Why a report's train_item.avg gives no speed: "no train_item.avg", "train_item.avg is 0
// (not a positive number)", "train_item.avg is null (not a number)" (a value of the wrong type is
// the typed reader's error, in the same words).
std::string items_reason(const core::InstanceReport& r) {
  if (!r.train_item || !r.train_item->avg_written) return "no train_item.avg";
  if (!r.train_item->avg) return "train_item.avg is null (not a number)";
  return fmt::format("train_item.avg is {:g} (not a positive number)", *r.train_item->avg);
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

std::optional<ReportFileName> parse_report_file_name(const std::string& file, const std::string& suite) {
  std::size_t dot = suite.empty() ? file.find('.') : suite.size();
  if (dot == std::string::npos || dot == 0 || (!suite.empty() && file.compare(0, dot + 1, suite + ".") != 0)) {
    return std::nullopt;
  }
  static const std::regex rest(R"(^(.+)\.R(\d+)\.D\d+(\.FAIL)?\..*\.json$)");
  std::smatch m;
  const std::string tail = file.substr(dot + 1);
  if (!std::regex_match(tail, m, rest)) return std::nullopt;
  ReportFileName named{file.substr(0, dot), m[1].str(), std::nullopt};
  int run = 0;
  const std::string digits = m[2].str();
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), run);
  if (ec == std::errc() && end == digits.data() + digits.size()) named.run = run;
  return named;
}

int run_number(const std::string& dir_name) {
  static const std::regex pattern(R"(^(R|output)(\d{1,6})$)");
  std::smatch m;
  return std::regex_match(dir_name, m, pattern) ? std::stoi(m[2].str()) : -1;
}

namespace {
double value_or_nan(const std::optional<double>& v) { return v ? *v : kNaN; }
double avg_of(const std::optional<core::Stats>& s) { return s ? value_or_nan(s->avg) : kNaN; }
}  // namespace

Instance parse_instance(const core::InstanceReport& r, const std::string& file_name) {
  Instance i;
  i.file = file_name;
  i.slot = r.jr_id ? static_cast<int>(*r.jr_id) : slot_from_file_name(file_name);
  i.items_per_s = r.train_item ? value_or_nan(r.train_item->avg) : kNaN;
  if (r.gpu_monitor) i.gpu_util_pct = value_or_nan(r.gpu_monitor->util_pct_mean);
  if (r.stall) {
    i.stall_pct = value_or_nan(r.stall->stall_pct);
    i.wait_s = avg_of(r.stall->wait);
    i.h2d_s = avg_of(r.stall->h2d);
    i.compute_s = avg_of(r.stall->compute);
    const double iteration_s = avg_of(r.stall->iteration);
    if (const auto exposed = r.metric("allreduce_exposed_s"); exposed && iteration_s > 0.0) {
      i.allreduce_pct = 100.0 * *exposed / iteration_s;
    }
  }
  if (r.machine && r.machine->blas) i.blas = r.machine->blas->name;
  i.observation_s = avg_of(r.train);
  if (r.process_cpu) i.cpu_per_item_us = value_or_nan(r.process_cpu->per_item_us);
  // Newer reports only (docs/report-format.md); absent means "not recorded".
  if (r.stability) {
    const core::StabilityInfo& st = *r.stability;
    i.stability = Stability{static_cast<int>(st.observations), value_or_nan(st.sd_pct), value_or_nan(st.median_s),
                            value_or_nan(st.trend_pct), st.warmup_trending, st.short_observations};
  }
  if (r.interference) {
    const core::InterferenceInfo& in = *r.interference;
    i.interference = Interference{value_or_nan(in.other_cpu_pct),          value_or_nan(in.steal_pct),
                                  value_or_nan(in.probe_before_s),         value_or_nan(in.probe_after_s),
                                  value_or_nan(in.probe_drift_pct),        value_or_nan(in.parallel_probe_before_s),
                                  value_or_nan(in.parallel_probe_after_s)};
  }
  const bool nan_loss =
      std::any_of(r.batch_loss.begin(), r.batch_loss.end(), [](const std::optional<double>& v) { return !v; });
  if (file_name.find(".FAIL.") != std::string::npos) {
    i.failed = true;
    i.reason = r.reason.empty() ? "FAIL report" : r.reason;
  } else if (!r.completed) {
    i.failed = true;
    i.reason = r.reason.empty() ? "completed is not true" : r.reason;
  } else if (nan_loss) {
    i.failed = true;
    i.reason = "NaN in batch_loss";
  } else if (!(std::isfinite(i.items_per_s) && i.items_per_s > 0.0)) {
    i.failed = true;
    i.reason = items_reason(r);
  }
  return i;
}

Instance parse_instance(const nlohmann::json& report, const std::string& file_name) {
  try {
    return parse_instance(core::parse_instance_report(report), file_name);
  } catch (const core::ReportFormatError& e) {
    Instance i;
    i.file = file_name;
    i.slot = slot_from_file_name(file_name);
    i.failed = true;
    i.reason = e.what();
    return i;
  }
}

namespace {

// The run directories `dir` names, in order: R<k>/output<k> of a tree, or the one run of a run
// directory or a report file.
std::vector<fs::path> run_dirs_of(const fs::path& dir, ReportsInput input, const std::string& flag) {
  std::error_code ec;
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
  std::vector<fs::path> out;
  for (auto& [k, d] : run_dirs) out.push_back(std::move(d));
  return out;
}

// Adds `inst` to benchmark `bench` in run `run`.
void add_instance(ReportsTree& tree, const std::string& bench, const std::string& run, Instance inst) {
  BenchInput& b = tree.benches[bench];
  b.name = bench;
  if (b.runs.empty() || b.runs.back().run != run) b.runs.push_back({run, {}});
  b.runs.back().instances.push_back(std::move(inst));
}

// One JSON file of run `run`; whether it counts as an instance of `suite` (read or failed).
bool read_report_file(const fs::path& file, const std::string& run, const std::string& suite, ReportsTree& tree) {
  const std::string fname = file.filename().string();
  nlohmann::json j;
  {
    std::ifstream in(file);
    j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  const std::optional<core::ReportIdentity> id = j.is_discarded() ? std::nullopt : core::report_identity(j);
  // A file named as a report of this suite that cannot be read as one is a failed
  // instance, listed by name, not a silent gap (valid JSON that is no report object included).
  const std::optional<ReportFileName> named = !id ? parse_report_file_name(fname, suite) : std::nullopt;
  if (named) {
    const std::string& bench = named->name;
    const char* what = j.is_discarded() ? "not valid JSON" : "not a report object";
    ++(j.is_discarded() ? tree.notes.unreadable : tree.notes.not_reports);
    tree.notes.warnings.push_back(fmt::format("{}/{}: {}, counted as a failure of {}", run, fname, what, bench));
    Instance i;
    i.file = fname;
    i.slot = slot_from_file_name(fname);
    i.failed = true;
    i.reason = std::string("unreadable report (") + what + ")";
    add_instance(tree, bench, run, std::move(i));
    return true;
  }
  if (j.is_discarded()) {
    ++tree.notes.unreadable;
    tree.notes.warnings.push_back(fmt::format("{}/{}: not valid JSON, ignored", run, fname));
    return false;
  }
  if (!id) {
    ++tree.notes.not_reports;
    return false;
  }
  if (id->suite != suite) {
    ++tree.notes.other_suite;
    return false;
  }
  Instance inst = parse_instance(j, fname);
  // No training loop reaches this rate: a corrupt value must not silently become the result.
  if (!inst.failed && inst.items_per_s > kImplausibleItemsPerS) {
    inst.failed = true;
    inst.reason = fmt::format("implausible train_item.avg {:g} items/s", inst.items_per_s);
    tree.notes.warnings.push_back(fmt::format("{}/{}: {}, counted as a failure", run, fname, inst.reason));
  }
  add_instance(tree, id->name, run, std::move(inst));
  return true;
}

}  // namespace

ReportsTree load_reports_tree(const fs::path& dir, const std::string& suite, int min_runs, const std::string& flag) {
  // One report file, or one run directory (mlbench-run without --repeat-suite), is one run.
  const ReportsInput input = reports_input_kind(dir);
  const std::string only_file = input == ReportsInput::ReportFile ? dir.filename().string() : "";
  ReportsTree tree;
  for (const fs::path& run_dir : run_dirs_of(dir, input, flag)) {
    const std::string run = run_name(run_dir);
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(run_dir)) {
      if (!only_file.empty() && e.path().filename() != only_file) continue;
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    bool any = false;
    for (const fs::path& file : files) any = read_report_file(file, run, suite, tree) || any;
    if (any) tree.runs.push_back(run);
  }
  // A single run was asked for by name: it is read whatever --min-runs says (the caller notes it).
  if (input != ReportsInput::Tree && tree.runs.empty()) {
    throw InputError(fmt::format("--reports {}: holds no report of suite '{}'", dir.string(), suite));
  }
  // Fewer runs than --min-runs still show what they can (the caller notes it); none is an error.
  if (input == ReportsInput::Tree && tree.runs.empty()) {
    throw InputError(fmt::format("{} {}: found 0 run(s) with reports of suite '{}'; at least {} are needed", flag,
                                 dir.string(), suite, min_runs));
  }
  return tree;
}

}  // namespace mlbench::report
