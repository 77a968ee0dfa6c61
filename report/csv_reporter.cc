// The CSV export: a per-bench table with per-run values, then the suite
// statistics, then (with --compare) the comparison; blocks separated by one
// empty line. Shortest round-trip numbers so nothing is lost; NaN as an empty cell.
#include <cmath>
#include <ostream>
#include <set>

#include <fmt/format.h>

#include "report/csv_text.h"
#include "report/reporter.h"
#include "report/significance.h"

namespace mlbench::report {
namespace {
using csv::num;
using csv::quoted;
std::string boolean(bool b) {
  return b ? "True" : "False";
}
// "R1;R4/D0": the places of named passes and instances, ';'-separated.
std::string places(const std::vector<NamedValue>& vs) {
  std::string s;
  for (const NamedValue& v : vs) s += (s.empty() ? "" : ";") + v.where;
  return s;
}
}  // namespace

void CsvReporter::write(const Report& report, std::ostream& out) const {
  out << "bench,target,result,sd,sd_frac,diff,n,failures,instances,stall_pct,compute_frac,h2d_frac,wait_frac,"
         "analysis_compute_pct,analysis_prep_pct,analysis_fetch_pct,min_run,max_run,unstable,instability_cause,"
         "instability_evidence,dropped,outliers";
  for (const std::string& run : report.runs) out << "," << quoted("run_" + run);
  out << "\n";
  for (const BenchResult& b : report.benches) {
    out << quoted(b.name) << "," << num(b.target ? b.target->items_per_s : kNaN) << "," << num(b.result) << ","
        << num(b.sd) << "," << num(b.sd_frac) << "," << num(b.diff) << "," << b.n << "," << b.failures << ","
        << b.instances << "," << num(b.stall_pct) << "," << num(b.compute_frac) << "," << num(b.h2d_frac) << ","
        << num(b.wait_frac) << "," << num(b.analysis ? b.analysis->compute_pct : kNaN) << ","
        << num(b.analysis ? b.analysis->prep_pct : kNaN) << "," << num(b.analysis ? b.analysis->fetch_pct : kNaN) << ","
        << num(b.min_run) << "," << num(b.max_run) << "," << boolean(b.instability.has_value()) << ","
        << quoted(b.instability ? b.instability->cause : "") << ","
        << quoted(b.instability ? b.instability->evidence : "") << "," << quoted(places(b.dropped)) << ","
        << quoted(places(b.outliers));
    for (const std::string& run : report.runs) {
      double v = kNaN;
      for (const RunValue& r : b.runs) {
        if (r.run == run) v = r.items_per_s;
      }
      out << "," << num(v);
    }
    out << "\n";
  }
  const SuiteStatistics& s = report.stats;
  out << "\nstatistic,value,pass\n";
  out << "bench_passes,," << boolean(s.bench_passes) << "\n";
  out << "deviation_quantile_80_pct," << num(s.deviation_q80_pct) << "," << boolean(s.deviation_passes) << "\n";
  out << "performance_pct," << num(s.performance_pct) << "," << boolean(s.performance_passes) << "\n";
  out << "geomean_ratio," << num(s.geomean_ratio) << ",\n";
  out << "failure_rate," << num(s.failure_rate) << ",\n";
  out << "failed_instances," << s.failed_instances << ",\n";
  out << "total_instances," << s.total_instances << ",\n";
  out << "milabench_score," << num(s.milabench_score) << ",\n";
  if (report.comparison) {
    out << "\nbench,result,sd,other_result,other_sd,ratio,change_pct,combined_sd,significant,p_value,test,alpha,n,"
           "other_n,method,verdict,note,beyond_combined_sd\n";
    for (const CompareRow& r : report.comparison->rows) {
      out << quoted(r.name) << "," << num(r.a_result) << "," << num(r.a_sd) << "," << num(r.b_result) << ","
          << num(r.b_sd) << "," << num(r.ratio) << "," << num(r.change_pct) << "," << num(r.combined_sd) << ","
          << boolean(r.significant) << "," << num(r.p_value) << "," << kSignificanceTest << ","
          << num(kSignificanceAlpha) << "," << r.a_n << "," << r.b_n << "," << quoted(r.method) << ","
          << quoted(r.verdict) << "," << quoted(r.note) << "," << boolean(r.beyond_combined_sd) << "\n";
    }
  }
}

}  // namespace mlbench::report
