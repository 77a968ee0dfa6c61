// mlbench-report: reads a reports tree of repeated runs, compares each
// benchmark to its target, and prints the Mila-style table and statistics;
// optionally writes CSV, JSON and a self-contained HTML page, and compares with
// another tree. See docs/report.md.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/atomic_file.h"
#include "core/cli.h"
#include "core/credentials.h"
#include "core/layout.h"
#include "core/report_name.h"
#include "report/blas_notes.h"
#include "report/report_builder.h"
#include "report/report_input.h"
#include "report/report_statistics.h"
#include "report/reporter.h"
#include "report/reports_tree.h"
#include "report/stall_results.h"
#include "report/store_command.h"
#include "report/targets.h"

namespace fs = std::filesystem;
using namespace mlbench::report;

namespace {
void write_output(const Reporter& reporter, const Report& report, const std::string& file) {
  std::ostringstream s;
  reporter.write(report, s);
  mlbench::core::write_file_atomic(file, s.str());
}

// --write-targets: the file, with a note saying where its numbers come from.
void write_targets_file(const std::string& file, const std::string& model, const std::string& user_note,
                        const std::string& reports, const std::string& suite, const ReportsTree& tree, Report& report) {
  std::string blas;
  for (const auto& [name, runs] : blas_by_name(tree)) blas += (blas.empty() ? "" : ", ") + name;
  const std::string note = fmt::format(
      "{}{}written by mlbench-report --write-targets from {} ({} runs of suite '{}', BLAS: {}) on {}: each target is "
      "the median of the runs' items/s rounded down to 2 significant digits (docs/report.md)",
      user_note, user_note.empty() ? "" : "; ", reports, tree.runs.size(), suite, blas.empty() ? "not recorded" : blas,
      mlbench::core::utc_iso8601(std::chrono::system_clock::now()).substr(0, 10));
  std::vector<std::string> skipped;
  nlohmann::json targets = make_targets(report.benches, model, note, skipped);
  // A CPU targets file names the CPU it was made on: reports compare only with their own CPU's.
  if (is_cpu_targets(parse_targets(targets, file))) {
    const auto machine = reports_machine(reports);
    if (machine && machine->gpus.empty() && !machine->cpu_model.empty()) {
      set_targets_machine(targets, machine->cpu_model, machine->logical_cores);
    } else {
      report.notes.warnings.push_back(fmt::format(
          "--write-targets: the reports name no CPU (no machine.json, no machine block): {} has no cpu_model, and "
          "reports will not know which CPU its targets were made on",
          file));
    }
  }
  if (targets["benchmarks"].empty())
    throw InputError("--write-targets: no benchmark has a run value to make a target of");
  for (const std::string& b : skipped) {
    report.notes.warnings.push_back(fmt::format("--write-targets: {} has no run value, left out of {}", b, file));
  }
  for (std::string& w : targets_from_failing_benches(report.benches, targets))
    report.notes.warnings.push_back(std::move(w));
  mlbench::core::write_file_atomic(file, targets.dump(2) + "\n");
}

// The command line as parsed.
struct ReportOptions {
  std::string reports, suite, gpu_model, targets_file, targets_dir, html, csv, json, compare, color = "auto";
  std::vector<std::string> stall_dirs;
  int min_runs = kDefaultMinRuns;
  std::string write_targets, targets_model = "CPU", targets_note;
  // --store: the results store's side (store_command.h).
  std::string store, machine_kind;
  std::vector<std::string> imports;
  std::optional<std::string> history;  // --history [BENCH]: "" for every benchmark
  bool machines = false;
};

// Parses argv into `o`; an exit status when the program should end now (--help, --version, a bad flag).
std::optional<int> parse_command_line(int argc, char** argv, ReportOptions& o) {
  CLI::App app{"mlbench-report: compare repeated runs of a suite with per-model targets (docs/report.md)",
               "mlbench-report"};
  app.add_option("--reports", o.reports,
                 "Reports: a tree with one sub-directory per run (R0.. or output0..), one run directory "
                 "(mlbench-run's output), or one report file (required unless --store)");
  app.add_option("--store", o.store,
                 "The results store: a SQLite file or a postgresql:// URL (docs/report.md, \"The results store\")");
  app.add_option("--import", o.imports,
                 "With --store: load run folders (a tree of R<k>/ or output<k>/, one run directory) and the "
                 "stall.json under them into the store; repeatable; a report already there is skipped");
  std::string history_bench;
  auto* history =
      app.add_option(
             "--history", history_bench,
             "With --store: per benchmark and machine, its runs over time and each run's change against the runs "
             "before it; BENCH: only that benchmark")
          ->expected(0, 1);
  app.add_flag("--machines", o.machines, "With --store: per benchmark the latest run on each machine, side by side");
  app.add_option("--machine-kind", o.machine_kind,
                 "With --store --write-targets: the machine kind whose runs make the targets (default: the only one)");
  app.add_option("--name", o.suite,
                 "Suite name: only reports whose \"suite\" equals it are used (default: the one suite the "
                 "reports hold)");
  auto* gpu = app.add_option("--gpu-model", o.gpu_model,
                             "Targets of this GPU/CPU model (configs/targets/<model>.json, "
                             "case-insensitive)");
  auto* tf = app.add_option("--targets", o.targets_file, "Targets file to use instead of --gpu-model");
  gpu->excludes(tf);
  app.add_option("--targets-dir", o.targets_dir, "Where --gpu-model looks (default: configs/targets of the checkout)");
  app.add_option("--html", o.html, "Write a self-contained HTML page here");
  app.add_option("--csv", o.csv, "Write the CSV export here");
  app.add_option("--json", o.json, "Write the JSON export here");
  app.add_option("--compare", o.compare,
                 "Another reports tree of the same suite to compare with (the baseline); each benchmark's "
                 "verdict comes from a two-sided Mann-Whitney U test over the passes (alpha 0.05)");
  app.add_option("--stall", o.stall_dirs,
                 "Also look for mlbench-stall results (stall.json) under this folder "
                 "(repeatable; --reports is always searched)");
  app.add_option("--min-runs", o.min_runs,
                 "Fewest runs accepted in a tree of runs (the Mila rule: 4); one run directory or file is always read")
      ->check(mlbench::core::integer_in(1, 1000))
      ->capture_default_str();
  app.add_option("--color", o.color, "Colour on the console: auto (on a terminal, unless NO_COLOR), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  app.add_option("--write-targets", o.write_targets,
                 "Write a targets file from these runs: per benchmark the median of its runs' items/s, rounded "
                 "down to 2 significant digits (docs/report.md)");
  app.add_option("--targets-model", o.targets_model, "The \"model\" of the file --write-targets writes")
      ->capture_default_str();
  app.add_option("--targets-note", o.targets_note, "Where the runs come from (machine, command), for --write-targets");
  app.set_version_flag("--version", mlbench::core::layout::version_line("mlbench-report"),
                       "The version and the commit it was built from");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --version
    std::cerr << "mlbench-report: error: " << mlbench::core::parse_error_line(e) << " (see --help)\n";
    return 2;
  }
  if (history->count() > 0) o.history = history_bench;
  if (o.store.empty() && (!o.imports.empty() || o.history || o.machines || !o.machine_kind.empty())) {
    std::cerr
        << "mlbench-report: error: --import, --history, --machines and --machine-kind need --store (see --help)\n";
    return 2;
  }
  if (!o.store.empty() && !o.reports.empty()) {
    std::cerr << "mlbench-report: error: --store and --reports are read apart: load the reports with --store "
              << mlbench::core::mask_credentials(o.store) << " --import " << o.reports << " (see --help)\n";
    return 2;
  }
  if (!o.store.empty() && o.imports.empty() && !o.history && !o.machines && o.write_targets.empty()) {
    std::cerr
        << "mlbench-report: error: --store needs --import, --history, --machines or --write-targets (see --help)\n";
    return 2;
  }
  if (o.store.empty() && o.reports.empty()) {
    std::cerr << "mlbench-report: error: --reports is required (or --store; see --help)\n";
    return 2;
  }
  return std::nullopt;
}

// --name, when not given, from the reports (the one suite they hold); 2 after the error line.
int resolve_suite(ReportOptions& o) {
  if (o.suite.empty()) {
    // The o.suite of a single run is rarely in doubt: take it from the o.reports when they hold one.
    const std::vector<std::string> suites = suites_in(o.reports);
    if (suites.size() != 1) {
      std::string list;
      for (const std::string& x : suites) list += (list.empty() ? "" : ", ") + x;
      std::cerr << "mlbench-report: error: --name is required: " << o.reports
                << (suites.empty() ? " holds no instance reports to take the suite from"
                                   : " holds reports of several suites (" + list + ")")
                << " (see --help)\n";
      return 2;
    }
    o.suite = suites.front();
  }
  return 0;
}

// Reads the reports and writes every output asked for.
int run_report(const ReportOptions& o) {
  try {
    Targets targets;
    if (!o.targets_file.empty()) {
      targets = load_targets_file(o.targets_file);
    } else if (!o.gpu_model.empty()) {
      const std::vector<fs::path> dirs =
          o.targets_dir.empty() ? default_target_dirs() : std::vector<fs::path>{o.targets_dir};
      targets = load_targets_file(find_targets_file(o.gpu_model, dirs));
    }
    ReportsTree tree;
    Report report =
        load_report({o.reports, o.suite, targets, o.min_runs, {o.stall_dirs.begin(), o.stall_dirs.end()}}, &tree);
    if (!o.compare.empty()) {
      const ReportsTree other_tree = load_reports_tree(o.compare, o.suite, o.min_runs, "--compare");
      const Report other = build_report(o.suite, o.compare, other_tree, targets, {},
                                        std::min(o.min_runs, static_cast<int>(other_tree.runs.size())));
      report.comparison = Comparison{o.compare, other.runs, compare_results(report.benches, other.benches)};
      for (std::string& w : blas_compare_warnings(tree, other_tree, o.compare)) report.notes.warnings.push_back(w);
    }
    // Targets are made from --min-runs runs at least: a partial answer is shown, not kept.
    if (!o.write_targets.empty() && static_cast<int>(tree.runs.size()) < o.min_runs) {
      throw InputError(
          fmt::format("--write-targets: {} run(s) in {}; targets are made from at least {} "
                      "(--min-runs lowers it)",
                      tree.runs.size(), o.reports, o.min_runs));
    }
    if (!o.write_targets.empty())
      write_targets_file(o.write_targets, o.targets_model, o.targets_note, o.reports, o.suite, tree, report);
    const char* no_color = std::getenv("NO_COLOR");
    const bool use_color =
        o.color == "always" || (o.color == "auto" && isatty(STDOUT_FILENO) && !(no_color && *no_color));
    ConsoleReporter(use_color).write(report, std::cout);
    if (!o.csv.empty()) write_output(CsvReporter(), report, o.csv);
    if (!o.json.empty()) write_output(JsonReporter(), report, o.json);
    if (!o.html.empty()) write_output(HtmlReporter(), report, o.html);
    for (const auto& [flag, file] :
         {std::pair{"CSV", &o.csv}, {"JSON", &o.json}, {"HTML", &o.html}, {"Targets", &o.write_targets}}) {
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

}  // namespace

int main(int argc, char** argv) {
  ReportOptions o;
  if (const auto exit = parse_command_line(argc, argv, o)) return *exit;
  if (!o.store.empty()) {
    const char* no_color = std::getenv("NO_COLOR");
    return run_store_command(
        {o.store, o.imports, o.history.has_value(), o.history.value_or(""), o.machines, o.suite, o.csv, o.json, o.html,
         o.write_targets, o.machine_kind, o.targets_note, o.min_runs,
         o.color == "always" || (o.color == "auto" && isatty(STDOUT_FILENO) && !(no_color && *no_color))});
  }
  if (const int rc = resolve_suite(o)) return rc;
  return run_report(o);
}
