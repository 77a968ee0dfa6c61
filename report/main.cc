// mlbench-report: reads a reports tree of repeated runs, compares each
// benchmark to its target, and prints the Mila-style table and statistics;
// optionally writes CSV, JSON and a self-contained HTML page, and compares with
// another tree. See docs/report.md.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/atomic_file.h"
#include "core/cli.h"
#include "report/report_builder.h"
#include "report/report_statistics.h"
#include "report/reporter.h"
#include "report/reports_tree.h"
#include "report/stall_results.h"
#include "report/targets.h"

namespace fs = std::filesystem;
using namespace mlbench::report;

namespace {
void write_output(const Reporter& reporter, const Report& report, const std::string& file) {
  std::ostringstream s;
  reporter.write(report, s);
  mlbench::core::write_file_atomic(file, s.str());
}

fs::path self_path(const char* argv0) {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path(argv0) : p;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mlbench-report: compare repeated runs of a suite with per-model targets (docs/report.md)",
               "mlbench-report"};
  std::string reports, suite, gpu_model, targets_file, targets_dir, html, csv, json, compare, color = "auto";
  std::vector<std::string> stall_dirs;
  int min_runs = kDefaultMinRuns;
  app.add_option("--reports", reports, "Reports tree: one sub-directory per run (R0.. or output0..)")->required();
  app.add_option("--name", suite, "Suite name: only reports whose \"suite\" equals it are used")->required();
  auto* gpu = app.add_option("--gpu-model", gpu_model,
                             "Targets of this GPU/CPU model (configs/targets/<model>.json, "
                             "case-insensitive)");
  auto* tf = app.add_option("--targets", targets_file, "Targets file to use instead of --gpu-model");
  gpu->excludes(tf);
  app.add_option("--targets-dir", targets_dir, "Where --gpu-model looks (default: configs/targets of the checkout)");
  app.add_option("--html", html, "Write a self-contained HTML page here");
  app.add_option("--csv", csv, "Write the CSV export here");
  app.add_option("--json", json, "Write the JSON export here");
  app.add_option("--compare", compare, "Another reports tree of the same suite to compare with (the baseline)");
  app.add_option("--stall", stall_dirs,
                 "Also look for mlbench-stall results (stall.json) under this folder "
                 "(repeatable; --reports is always searched)");
  app.add_option("--min-runs", min_runs, "Fewest runs accepted (the Mila rule: 4)")
      ->check(mlbench::core::integer_in(1, 1000))
      ->capture_default_str();
  app.add_option("--color", color, "Colour on the console: auto (on a terminal, unless NO_COLOR), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "mlbench-report: error: " << mlbench::core::parse_error_line(e) << " (see --help)\n";
    return 2;
  }

  try {
    Targets targets;
    if (!targets_file.empty()) {
      targets = load_targets_file(targets_file);
    } else if (!gpu_model.empty()) {
      const std::vector<fs::path> dirs =
          targets_dir.empty() ? default_target_dirs(self_path(argv[0])) : std::vector<fs::path>{targets_dir};
      targets = load_targets_file(find_targets_file(gpu_model, dirs));
    }
    const ReportsTree tree = load_reports_tree(reports, suite, min_runs);
    std::vector<fs::path> roots{reports};
    for (const std::string& d : stall_dirs) {
      if (!fs::exists(d)) throw InputError(fmt::format("--stall {}: no such file or directory", d));
      roots.emplace_back(d);
    }
    std::vector<std::string> stall_warnings;
    const auto analyses = find_stall_analyses(roots, stall_warnings);
    Report report = build_report(suite, reports, tree, targets, analyses, min_runs);
    for (std::string& w : stall_warnings) report.notes.warnings.push_back(std::move(w));
    if (!compare.empty()) {
      const ReportsTree other_tree = load_reports_tree(compare, suite, min_runs, "--compare");
      const Report other = build_report(suite, compare, other_tree, targets, {}, min_runs);
      report.comparison = Comparison{compare, other.runs, compare_results(report.benches, other.benches)};
    }
    const char* no_color = std::getenv("NO_COLOR");
    const bool use_color = color == "always" || (color == "auto" && isatty(STDOUT_FILENO) && !(no_color && *no_color));
    ConsoleReporter(use_color).write(report, std::cout);
    if (!csv.empty()) write_output(CsvReporter(), report, csv);
    if (!json.empty()) write_output(JsonReporter(), report, json);
    if (!html.empty()) write_output(HtmlReporter(), report, html);
    for (const auto& [flag, file] : {std::pair{"CSV", &csv}, {"JSON", &json}, {"HTML", &html}}) {
      if (!file->empty()) std::cout << flag << ": " << *file << "\n";
    }
    return 0;
  } catch (const InputError& e) {
    std::cerr << "mlbench-report: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "mlbench-report: error: " << e.what() << "\n";
    return 1;
  }
}
