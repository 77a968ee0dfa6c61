// Results at the end of a run (see run_results.h).
#include "run_results.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "report/report_input.h"
#include "report/reporter.h"
#include "report/reports_tree.h"
#include "reports.h"

namespace mlbench::runner {

namespace fs = std::filesystem;

namespace {

// The final report of an instance at its sweep point: the newest of its reports there.
std::optional<std::pair<fs::path, core::InstanceReport>> final_report(const fs::path& dir, const Instance& inst) {
  std::optional<std::pair<fs::path, core::InstanceReport>> found;
  for (const fs::path& p : list_reports(dir, inst.report_prefix)) {
    auto r = read_instance_report(p);
    if (!r || !same_point(*r, inst)) continue;
    found = {p, std::move(*r)};  // names sort by their UTC timestamp: the last is the newest
  }
  return found;
}

// `where`: "D1", or "R0/D1" when the run has several passes.
void add_instance(ResultRow& row, const fs::path& file, const core::InstanceReport& r, const std::string& where) {
  const report::Instance i = report::parse_instance(r, file.filename().string());
  ++row.instances;
  if (!i.failed) {
    ++row.passed;
    row.items_per_s.push_back(i.items_per_s);
    if (std::isfinite(i.stall_pct)) row.stall_pct.push_back(i.stall_pct);
    return;
  }
  std::string reason = i.reason;
  // The runner's reason ("exit 1") with the benchmark's own, when it gave one.
  if (!r.benchmark_reason.empty()) reason += " (" + r.benchmark_reason + ")";
  row.failures.push_back(where + ": " + reason);
}

}  // namespace

std::vector<ResultRow> collect_results(const std::vector<Pass>& passes, const std::optional<report::Targets>& targets,
                                       const std::map<std::string, std::string>& failed) {
  std::vector<ResultRow> rows;
  if (passes.empty()) return rows;
  for (std::size_t s = 0; s < passes.front().plan.size(); ++s) {
    const PlannedStep& first = passes.front().plan[s];
    ResultRow row;
    row.title = first.title;
    if (targets && !first.instances.empty()) {
      const auto t = targets->benchmarks.find(first.instances.front().name);
      if (t != targets->benchmarks.end() && std::isfinite(t->second.items_per_s)) row.target = t->second.items_per_s;
    }
    for (const Pass& pass : passes) {
      if (s >= pass.plan.size()) continue;
      for (const Instance& inst : pass.plan[s].instances) {
        const std::string where =
            passes.size() > 1 ? fmt::format("R{}/D{}", pass.settings.run_id, inst.slot) : fmt::format("D{}", inst.slot);
        // The runner's own verdict first: a run whose final record could not be written (a full
        // disk) or whose FAIL report is missing still failed.
        if (const auto f = failed.find((pass.dir / inst.log_name).string()); f != failed.end()) {
          ++row.instances;
          row.failures.push_back(where + ": " + f->second);
          continue;
        }
        if (auto r = final_report(pass.dir, inst)) add_instance(row, r->first, r->second, where);
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

bool report_results(Output& output, const std::vector<Pass>& passes, const RunEnd& end) {
  output.line("");
  std::istringstream table(format_results_table(collect_results(passes, end.targets, end.failed), end.color));
  for (std::string line; std::getline(table, line);) output.line(line);
  if (end.targets) {
    output.line(fmt::format("vs target: {} targets ({})", end.targets->model,
                            fs::path(end.targets->source).lexically_normal().string()));
  } else {
    output.line("vs target: " + (end.no_targets_why.empty() ? "no targets file for this machine kind (configs/targets/)"
                                                            : end.no_targets_why));
  }
  // The same page as `mlbench-report --reports <outdir> --html`, with whatever finished.
  bool ok = true;
  const fs::path html = end.outdir / "report.html";
  try {
    const report::Report r =
        report::load_report({end.outdir, end.suite, end.targets.value_or(report::Targets{}), 1, {}});
    std::ostringstream page;
    report::HtmlReporter().write(r, page);
    core::write_file_atomic(html, page.str());
    output.line("Report: " + html.string());
  } catch (const report::InputError& e) {
    output.line("Report: not written (" + std::string(e.what()) + ")");
  } catch (const std::exception& e) {
    // The atomic writer's message names the file and the cause ("cannot write PATH: ...").
    const std::string what = e.what();
    output.line(what.find(html.string()) != std::string::npos
                    ? "mlbench-run: error: " + what
                    : fmt::format("mlbench-run: error: cannot write {}: {}", html.string(), what));
    ok = false;
  }
  // Name only a summary written whole (a full disk may have refused it, or its last lines).
  const bool summaries = !passes.empty() && std::all_of(passes.begin(), passes.end(), [&](const Pass& p) {
    return end.finished_summaries.count(p.dir) > 0;
  });
  if (!summaries) {
    if (!passes.empty()) output.line("Summary: not written");
  } else if (passes.size() > 1) {
    output.line("Summary: " + (end.outdir / "R*" / "summary.txt").string());
  } else {
    output.line("Summary: " + (passes.front().dir / "summary.txt").string());
  }
  return ok;
}

}  // namespace mlbench::runner
