// mlbench-report --store (see store_command.h).
#include "report/store_command.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/report_name.h"
#include "report/reports_tree.h"
#include "report/store_import.h"
#include "report/store_reporters.h"
#include "report/store_views.h"
#include "report/targets.h"
#include "store/results_store.h"

namespace mlbench::report {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string list(const std::set<std::string>& xs) {
  std::string s;
  for (const std::string& x : xs) s += (s.empty() ? "" : ", ") + x;
  return s;
}

void write_output(const StoreViewReporter& reporter, const StoreView& view, const std::string& file) {
  std::ostringstream s;
  reporter.write(view, s);
  core::write_file_atomic(file, s.str());
}

// A view needs runs: an empty store (or no run of the benchmark asked for) is one clear error.
std::vector<store::HistoryInstance> instances_for_view(store::ResultsStore& s, const StoreCommand& c,
                                                       const std::string& flag) {
  store::InstanceQuery q;
  q.suite = c.suite;
  std::vector<store::HistoryInstance> all = s.instances(q);
  if (all.empty()) {
    throw InputError(
        fmt::format("{}: the store {} holds no run{} (record runs with mlbench-run --store {} or load "
                    "run folders with --import DIR)",
                    flag, s.name(), c.suite.empty() ? "" : " of suite " + c.suite, s.name()));
  }
  if (c.history_bench.empty() || flag != "--history") return all;
  std::set<std::string> benches;
  std::vector<store::HistoryInstance> out;
  for (store::HistoryInstance& h : all) {
    benches.insert(h.instance.bench);
    if (h.instance.bench == c.history_bench) out.push_back(std::move(h));
  }
  if (out.empty()) {
    throw InputError(fmt::format("--history {}: no run of {} in the store {} (benchmarks there: {})", c.history_bench,
                                 c.history_bench, s.name(), list(benches)));
  }
  return out;
}

// The machine kind --write-targets works on: --machine-kind (the kind, or its model), else the only one.
std::string chosen_kind(const std::vector<store::MachineRecord>& machines, const std::set<std::string>& used,
                        const std::string& wanted, const std::string& store_name) {
  std::set<std::string> kinds;
  for (const store::MachineRecord& m : machines) {
    if (used.count(m.fingerprint)) kinds.insert(m.kind);
  }
  if (wanted.empty()) {
    if (kinds.size() == 1) return *kinds.begin();
    throw InputError(
        fmt::format("--write-targets: the store {} holds runs of {} machine kinds ({}); name one with "
                    "--machine-kind",
                    store_name, kinds.size(), list(kinds)));
  }
  for (const std::string& k : kinds) {
    const std::string model = k.rfind("CPU: ", 0) == 0 ? k.substr(5) : k;
    if (lower(k) == lower(wanted) || lower(model) == lower(wanted)) return k;
  }
  throw InputError(fmt::format("--machine-kind {}: no run of that kind in the store {} (kinds there: {})", wanted,
                               store_name, kinds.empty() ? "none" : list(kinds)));
}

// --write-targets from the store: per benchmark the median of the pass values of every run of
// one machine kind, as make_targets does for a reports tree.
void write_targets_from_store(store::ResultsStore& s, const StoreCommand& c, std::vector<std::string>& notes) {
  store::InstanceQuery q;
  q.suite = c.suite;
  const std::vector<store::HistoryInstance> all = s.instances(q);
  if (all.empty()) throw InputError(fmt::format("--write-targets: the store {} holds no run", s.name()));
  std::set<std::string> suites, used;
  for (const store::HistoryInstance& h : all) {
    suites.insert(h.run.suite);
    used.insert(h.run.machine);
  }
  if (suites.size() > 1) {
    throw InputError(
        fmt::format("--write-targets: the store {} holds runs of several suites ({}); name one with --name", s.name(),
                    list(suites)));
  }
  const std::vector<store::MachineRecord> machines = s.machines();
  const std::string kind = chosen_kind(machines, used, c.machine_kind, s.name());
  std::map<std::string, const store::MachineRecord*> by_fp;
  for (const store::MachineRecord& m : machines) by_fp[m.fingerprint] = &m;
  const store::MachineRecord* example = nullptr;
  // bench -> (run, pass) -> items/s of the pass's non-failed instances
  std::map<std::string, std::map<std::pair<std::string, std::int64_t>, std::vector<double>>> values;
  std::map<std::string, std::pair<int, int>> counts;  // bench -> (instances, failures)
  std::set<std::pair<std::string, std::int64_t>> passes;
  std::set<std::string> runs;
  for (const store::HistoryInstance& h : all) {
    const auto m = by_fp.find(h.run.machine);
    if (m == by_fp.end() || m->second->kind != kind) continue;
    example = m->second;
    const std::pair<std::string, std::int64_t> pass{h.run.run_id, h.instance.pass};
    passes.insert(pass);
    runs.insert(h.run.run_id);
    auto& cell = values[h.instance.bench][pass];
    ++counts[h.instance.bench].first;
    if (h.instance.failed || !h.instance.items_per_s || !(*h.instance.items_per_s > 0.0)) {
      ++counts[h.instance.bench].second;
    } else {
      cell.push_back(*h.instance.items_per_s);
    }
  }
  if (static_cast<int>(passes.size()) < c.min_runs) {
    throw InputError(
        fmt::format("--write-targets: {} pass(es) of {} in the store {}; targets are made from at least {} "
                    "(--min-runs lowers it)",
                    passes.size(), kind, s.name(), c.min_runs));
  }
  std::vector<BenchResult> benches;
  for (const auto& [bench, by_pass] : values) {
    BenchResult b;
    b.name = bench;
    b.instances = counts[bench].first;
    b.failures = counts[bench].second;
    for (const auto& [pass, items] : by_pass) {
      RunValue v;
      v.run = fmt::format("{}/{}", pass.first, pass.second);
      if (!items.empty()) v.items_per_s = std::accumulate(items.begin(), items.end(), 0.0) / items.size();
      b.runs.push_back(v);
    }
    benches.push_back(std::move(b));
  }
  const bool cpu = example && example->gpu_model.empty();
  const std::string note = fmt::format(
      "{}{}written by mlbench-report --write-targets from the results store {} ({} runs, {} passes of suite '{}' on "
      "{}) on {}: each target is the median of the passes' items/s rounded down to 2 significant digits "
      "(docs/report.md)",
      c.targets_note, c.targets_note.empty() ? "" : "; ", s.name(), runs.size(), passes.size(), *suites.begin(), kind,
      core::utc_iso8601(std::chrono::system_clock::now()).substr(0, 10));
  std::vector<std::string> skipped;
  nlohmann::json targets = make_targets(benches, cpu ? "CPU" : kind, note, skipped);
  if (cpu) set_targets_machine(targets, example->cpu_model, example->logical_cores);
  if (targets["benchmarks"].empty()) {
    throw InputError("--write-targets: no benchmark has a pass value to make a target of");
  }
  for (const std::string& b : skipped) {
    notes.push_back(fmt::format("warning: --write-targets: {} has no pass value, left out of {}", b, c.write_targets));
  }
  for (std::string& w : targets_from_failing_benches(benches, targets)) notes.push_back("warning: " + w);
  core::write_file_atomic(c.write_targets, targets.dump(2) + "\n");
  notes.push_back(fmt::format("Targets: {} ({} of {} from {} passes)", c.write_targets, targets["benchmarks"].size(),
                              kind, passes.size()));
}

}  // namespace

int run_store_command(const StoreCommand& c) {
  try {
    // The views only read: a store on a read-only mount is read, and none is created.
    const store::Access access = c.imports.empty() ? store::Access::kReadOnly : store::Access::kReadWrite;
    std::error_code ec;
    if (access == store::Access::kReadOnly && !store::is_postgresql_url(c.store) &&
        !std::filesystem::exists(c.store, ec)) {
      const std::string flag = c.history ? "--history" : c.machines ? "--machines" : "--write-targets";
      throw InputError(
          fmt::format("{}: the store {} holds no run: there is no such file (record runs with "
                      "mlbench-run --store {} or load run folders with --import DIR)",
                      flag, c.store, c.store));
    }
    const std::unique_ptr<store::ResultsStore> s = store::ResultsStore::open(c.store, access);
    StoreView view;
    view.store = s->name();
    int invalid = 0;  // imported reports unreadable or not valid: the exit says so
    if (!c.imports.empty()) {
      ImportCounts counts;
      for (const std::string& dir : c.imports) import_into_store(*s, dir, counts);
      for (const std::string& w : counts.warnings) view.notes.push_back("warning: " + w);
      view.notes.push_back(import_summary(counts));
      invalid = counts.invalid;
    }
    if (c.history) {
      const auto instances = instances_for_view(*s, c, "--history");
      view.history = build_history(instances, s->machines(), s->stall_analyses(c.history_bench));
      view.history->store = s->name();
      view.history->bench = c.history_bench;
    }
    if (c.machines) {
      const auto instances = instances_for_view(*s, c, "--machines");
      view.machines = build_machines_view(instances, s->machines(), s->stall_analyses());
      view.machines->store = s->name();
    }
    if (!c.write_targets.empty()) write_targets_from_store(*s, c, view.notes);
    StoreConsoleReporter().write(view, std::cout);
    if (!c.csv.empty()) write_output(StoreCsvReporter(), view, c.csv);
    if (!c.json.empty()) write_output(StoreJsonReporter(), view, c.json);
    if (!c.html.empty()) write_output(StoreHtmlReporter(), view, c.html);
    for (const auto& [flag, file] : {std::pair{"CSV", &c.csv}, {"JSON", &c.json}, {"HTML", &c.html}}) {
      if (!file->empty()) std::cout << flag << ": " << *file << "\n";
    }
    if (invalid > 0) {
      std::cerr << "mlbench-report: error: " << invalid
                << " imported report(s) cannot be read or do not validate (named above); they are failed instances in "
                   "the store\n";
      return 1;
    }
    return 0;
  } catch (const store::StoreError& e) {
    std::cerr << "mlbench-report: error: results store " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    // InputError, a file that cannot be written.
    std::cerr << "mlbench-report: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace mlbench::report
