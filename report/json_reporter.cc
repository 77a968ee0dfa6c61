// The JSON export: every number of the console view plus per-run values, so
// another tool can rebuild the table; NaN is written as null.
#include <cmath>
#include <ostream>

#include "report/reporter.h"
#include "report/significance.h"

namespace mlbench::report {

namespace {
nlohmann::json named_json(const std::vector<NamedValue>& vs) {
  nlohmann::json out = nlohmann::json::array();
  for (const NamedValue& v : vs) {
    out.push_back({{"where", v.where}, {"items_per_s", number_or_null(v.items_per_s)}, {"why", v.why}});
  }
  return out;
}

nlohmann::json bench_json(const BenchResult& b) {
  nlohmann::json runs = nlohmann::json::array();
  for (const RunValue& r : b.runs) {
    runs.push_back({{"run", r.run},
                    {"items_per_s", number_or_null(r.items_per_s)},
                    {"instances", r.instances},
                    {"failures", r.failures}});
  }
  nlohmann::json analysis;
  if (b.analysis) {
    analysis = {{"dir", b.analysis->dir},
                {"compute_pct", number_or_null(b.analysis->compute_pct)},
                {"prep_pct", number_or_null(b.analysis->prep_pct)},
                {"fetch_pct", number_or_null(b.analysis->fetch_pct)},
                {"rates", b.analysis->rates},
                {"self_check", b.analysis->self_check},
                {"verdict", b.analysis->verdict},
                {"remedy_text", b.analysis->remedy_text},
                {"advice", b.analysis->advice},
                {"has_split_svg", !b.analysis->split_svg.empty()},
                {"has_whatif_svg", !b.analysis->whatif_svg.empty()}};
  }
  return {{"bench", b.name},
          {"expected", b.expected},
          {"target", b.target ? number_or_null(b.target->items_per_s) : nlohmann::json()},
          {"perf_target", b.target ? number_or_null(b.target->perf_target) : nlohmann::json()},
          {"sd_target", b.target ? number_or_null(b.target->sd_target) : nlohmann::json()},
          {"result", number_or_null(b.result)},
          {"sd", number_or_null(b.sd)},
          {"sd_frac", number_or_null(b.sd_frac)},
          {"diff", number_or_null(b.diff)},
          {"n", b.n},
          {"enough_runs", b.enough_runs},
          {"instances", b.instances},
          {"failures", b.failures},
          {"failure_reasons", b.failure_reasons},
          {"min_run", number_or_null(b.min_run)},
          {"max_run", number_or_null(b.max_run)},
          {"stall_pct", number_or_null(b.stall_pct)},
          {"allreduce_pct", number_or_null(b.allreduce_pct)},
          {"gpu_util_pct", number_or_null(b.gpu_util_pct)},
          {"phase_split",
           {{"compute", number_or_null(b.compute_frac)},
            {"h2d", number_or_null(b.h2d_frac)},
            {"wait", number_or_null(b.wait_frac)}}},
          {"stall_analysis", analysis},
          {"runs", runs},
          {"unstable", b.instability.has_value()},
          {"instability", b.instability ? nlohmann::json{{"sd_pct", number_or_null(b.instability->sd_pct)},
                                                         {"limit_pct", number_or_null(b.instability->limit_pct)},
                                                         {"cause", b.instability->cause},
                                                         {"evidence", b.instability->evidence}}
                                        : nlohmann::json()},
          {"dropped", named_json(b.dropped)},
          {"outliers", named_json(b.outliers)}};
}
}  // namespace

nlohmann::json report_to_json(const Report& report) {
  const SuiteStatistics& s = report.stats;
  nlohmann::json benches = nlohmann::json::array();
  for (const BenchResult& b : report.benches) benches.push_back(bench_json(b));
  nlohmann::json j = {
      {"schema_version", kReportJsonSchemaVersion},
      {"suite", report.suite},
      {"reports_dir", report.reports_dir},
      {"runs", report.runs},
      {"min_runs", report.min_runs},
      {"targets", {{"model", report.targets.model}, {"source", report.targets.source}, {"note", report.targets.note}}},
      {"benchmarks", benches},
      {"statistics",
       {{"bench_passes", {{"pass", s.bench_passes}, {"missing", s.missing}, {"failed", s.failed}}},
        {"deviation_quantile_80", {{"value_pct", number_or_null(s.deviation_q80_pct)}, {"pass", s.deviation_passes}}},
        {"performance", {{"value_pct", number_or_null(s.performance_pct)}, {"pass", s.performance_passes}}},
        {"score",
         {{"geomean_ratio", number_or_null(s.geomean_ratio)},
          {"ratio_benches", s.ratio_benches},
          {"failure_rate", number_or_null(s.failure_rate)},
          {"failed_instances", s.failed_instances},
          {"total_instances", s.total_instances},
          {"meets_perf_share", number_or_null(s.meets_perf_share)},
          {"stable_share", number_or_null(s.stable_share)},
          {"milabench_score", number_or_null(s.milabench_score)}}}}},
      {"ignored",
       {{"other_suite", report.notes.other_suite},
        {"not_reports", report.notes.not_reports},
        {"unreadable", report.notes.unreadable},
        {"warnings", report.notes.warnings}}},
      {"notes", report.info},
      {"comparison", nullptr}};
  if (report.comparison) {
    nlohmann::json rows = nlohmann::json::array();
    for (const CompareRow& r : report.comparison->rows) {
      rows.push_back({{"bench", r.name},
                      {"result", number_or_null(r.a_result)},
                      {"sd", number_or_null(r.a_sd)},
                      {"other_result", number_or_null(r.b_result)},
                      {"other_sd", number_or_null(r.b_sd)},
                      {"ratio", number_or_null(r.ratio)},
                      {"change_pct", number_or_null(r.change_pct)},
                      {"combined_sd", number_or_null(r.combined_sd)},
                      {"beyond_combined_sd", r.beyond_combined_sd},
                      {"test", kSignificanceTest},
                      {"alpha", kSignificanceAlpha},
                      {"n", r.a_n},
                      {"other_n", r.b_n},
                      {"u", number_or_null(r.u)},
                      {"p_value", number_or_null(r.p_value)},
                      {"min_p", number_or_null(r.min_p)},
                      {"method", r.method},
                      {"significant", r.significant},
                      {"verdict", r.verdict},
                      {"note", r.note}});
    }
    j["comparison"] = {
        {"other_dir", report.comparison->other_dir}, {"other_runs", report.comparison->other_runs}, {"rows", rows}};
  }
  return j;
}

void JsonReporter::write(const Report& report, std::ostream& out) const {
  out << report_to_json(report).dump(2) << "\n";
}

}  // namespace mlbench::report
