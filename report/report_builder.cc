#include "report/report_builder.h"

#include "report/report_statistics.h"

namespace mlbench::report {

Report build_report(const std::string& suite, const std::string& reports_dir, const ReportsTree& tree,
                    const Targets& targets, const std::map<std::string, StallAnalysis>& analyses, int min_runs) {
  Report r;
  r.suite = suite;
  r.reports_dir = reports_dir;
  r.runs = tree.runs;
  r.min_runs = min_runs;
  r.targets = targets;
  r.notes = tree.notes;
  std::map<std::string, BenchInput> inputs = tree.benches;
  // An expected bench without any report still gets a row: its absence is the news.
  for (const auto& [name, t] : targets.benchmarks) {
    if (!inputs.count(name)) inputs[name].name = name;
  }
  std::vector<std::string> expected;
  for (const auto& [name, t] : targets.benchmarks) expected.push_back(name);
  for (const auto& [name, input] : inputs) {
    auto t = targets.benchmarks.find(name);
    BenchResult b = summarize_bench(
        input, t == targets.benchmarks.end() ? std::nullopt : std::optional<Target>(t->second), min_runs);
    auto a = analyses.find(name);
    if (a != analyses.end()) b.analysis = a->second;
    r.benches.push_back(std::move(b));
  }
  r.stats = summarize_suite(r.benches, expected);
  return r;
}

}  // namespace mlbench::report
