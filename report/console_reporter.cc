// The console view in the Mila layout (a pandas-printed table, then the
// Statistics lines), with colour only on a terminal.
#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "report/reporter.h"
#include "report/significance.h"

namespace mlbench::report {
namespace {
constexpr const char* kGreen = "\033[32m";
constexpr const char* kRed = "\033[31m";
constexpr const char* kReset = "\033[0m";

std::string pass_word(bool pass, bool color) {
  const char* word = pass ? "True" : "False";
  if (!color) return word;
  return fmt::format("{}{}{}", pass ? kGreen : kRed, word, kReset);
}

// pandas prints a float column with the fewest decimals (1..max) that show every value as
// it would with `max`; NaN as "NaN".
std::vector<std::string> float_column(const std::vector<double>& xs, int max_decimals) {
  int decimals = 1;
  for (double x : xs) {
    if (!std::isfinite(x)) continue;
    const std::string full = fmt::format("{:.{}f}", x, max_decimals);
    while (decimals < max_decimals &&
           full != fmt::format("{:.{}f}", x, decimals) + std::string(max_decimals - decimals, '0')) {
      ++decimals;
    }
  }
  decimals = std::min(decimals, max_decimals);
  std::vector<std::string> out;
  for (double x : xs) out.push_back(std::isfinite(x) ? fmt::format("{:.{}f}", x, decimals) : "NaN");
  return out;
}

// The columns mlbench adds to the Mila ones keep a fixed number of decimals.
std::vector<std::string> fixed_column(const std::vector<double>& xs, int decimals) {
  std::vector<std::string> out;
  for (double x : xs) out.push_back(std::isfinite(x) ? fmt::format("{:.{}f}", x, decimals) : "NaN");
  return out;
}

struct Column {
  std::string header;
  std::vector<std::string> cells;
};
}  // namespace

std::string format_bench_table(const Report& report) {
  std::vector<double> target, result, sd, sd_frac, diff, stall, gpu_util, fetch, prep, allreduce;
  std::vector<std::string> n, fail;
  bool any_analysis = false;
  bool any_allreduce = false;
  bool any_gpu_util = false;
  for (const BenchResult& b : report.benches) {
    target.push_back(b.target ? b.target->items_per_s : kNaN);
    result.push_back(b.result);
    sd.push_back(b.sd);
    sd_frac.push_back(b.sd_frac);
    diff.push_back(b.diff);
    n.push_back(std::to_string(b.n));
    fail.push_back(std::to_string(b.failures));
    stall.push_back(b.stall_pct);
    gpu_util.push_back(b.gpu_util_pct);
    any_gpu_util = any_gpu_util || std::isfinite(b.gpu_util_pct);
    fetch.push_back(b.analysis ? b.analysis->fetch_pct : kNaN);
    prep.push_back(b.analysis ? b.analysis->prep_pct : kNaN);
    allreduce.push_back(b.allreduce_pct);
    any_allreduce = any_allreduce || std::isfinite(b.allreduce_pct);
    any_analysis = any_analysis || b.analysis.has_value();
  }
  std::vector<Column> cols{{"target", float_column(target, 2)},
                           {"result", float_column(result, 6)},
                           {"sd", float_column(sd, 6)},
                           {"sd%", float_column(sd_frac, 6)},
                           {"diff", float_column(diff, 6)},
                           {"n", n},
                           {"fail", fail},
                           {"stall%", fixed_column(stall, 2)}};
  // Beside stall%: a low stall with a low gpu% points at the model, not at the data.
  if (any_gpu_util) cols.push_back({"gpu%", fixed_column(gpu_util, 2)});
  if (any_analysis) {
    cols.push_back({"fetch%", fixed_column(fetch, 2)});
    cols.push_back({"prep%", fixed_column(prep, 2)});
  }
  // Data-parallel benchmarks: the allreduce not hidden by backward, a stall of its own.
  if (any_allreduce) cols.push_back({"allreduce%", fixed_column(allreduce, 2)});
  std::size_t index_width = std::string("bench").size();
  for (const BenchResult& b : report.benches) index_width = std::max(index_width, b.name.size());
  std::vector<std::size_t> widths;
  for (const Column& c : cols) {
    std::size_t w = c.header.size();
    for (const std::string& s : c.cells) w = std::max(w, s.size());
    widths.push_back(w);
  }
  std::string out(index_width, ' ');
  std::size_t total = index_width;
  for (std::size_t c = 0; c < cols.size(); ++c) {
    out += fmt::format("  {:>{}}", cols[c].header, widths[c]);
    total += 2 + widths[c];
  }
  out += "\n" + fmt::format("{:<{}}", "bench", total) + "\n";
  for (std::size_t r = 0; r < report.benches.size(); ++r) {
    out += fmt::format("{:<{}}", report.benches[r].name, index_width);
    for (std::size_t c = 0; c < cols.size(); ++c) out += fmt::format("  {:>{}}", cols[c].cells[r], widths[c]);
    out += "\n";
  }
  return out;
}

std::string format_statistics(const SuiteStatistics& s, bool color) {
  auto value = [](double pct) { return std::isfinite(pct) ? fmt::format("{:+.4f} %", pct) : std::string("n/a"); };
  std::string out;
  out += "Statistics               |     Value | Pass |\n";
  out += "-------------------------|-----------|------|\n";
  out += fmt::format("{:<25}: {:>9} | {}\n", "Bench Passes", "", pass_word(s.bench_passes, color));
  out += fmt::format("{:<25}: {:>9} | {} |\n", "Deviation Quantile (80%)", value(s.deviation_q80_pct),
                     pass_word(s.deviation_passes, color));
  out += fmt::format("{:<25}: {:>9} | {}\n", "Performance", value(s.performance_pct),
                     pass_word(s.performance_passes, color));
  return out;
}

std::string format_score_line(const SuiteStatistics& s) {
  const std::string geo = std::isfinite(s.geomean_ratio) ? fmt::format("{:.4f}", s.geomean_ratio) : "n/a";
  const std::string rate = std::isfinite(s.failure_rate) ? fmt::format("{:.2f} %", s.failure_rate * 100.0) : "n/a";
  const std::string score = std::isfinite(s.milabench_score) ? fmt::format("{:.4f}", s.milabench_score) : "n/a";
  return fmt::format(
      "{:<25}: {} = geometric mean of result/target over {} benches | failure rate {} ({}/{} instances)"
      " | milabench score {}\n",
      "Score", geo, s.ratio_benches, rate, s.failed_instances, s.total_instances, score);
}

std::string format_comparison(const Comparison& cmp, bool color) {
  std::size_t w = std::string("bench").size();
  for (const CompareRow& r : cmp.rows) w = std::max(w, r.name.size());
  auto num = [](double x, int d) { return std::isfinite(x) ? fmt::format("{:.{}f}", x, d) : std::string("NaN"); };
  std::string out = fmt::format(
      "Compared with {} ({} runs): ratio = this / other; verdict and p from a two-sided Mann-Whitney U test over "
      "the per-pass values (alpha = {}); '*' = significant\n",
      cmp.other_dir, cmp.other_runs.size(), kSignificanceAlpha);
  out += fmt::format("{:<{}}  {:>14}  {:>12}  {:>14}  {:>12}  {:>8}  {:>9}  {}  {:>6}  {}\n", "bench", w, "this", "sd",
                     "other", "sd", "ratio", "change", " ", "p", "verdict");
  for (const CompareRow& r : cmp.rows) {
    std::string change = std::isfinite(r.change_pct) ? fmt::format("{:+.2f}%", r.change_pct) : "NaN";
    std::string flag = r.significant ? "*" : " ";
    if (color && r.significant) {
      change = fmt::format("{}{:>9}{}", r.verdict == "slower" ? kRed : kGreen, change, kReset);
    } else {
      change = fmt::format("{:>9}", change);
    }
    out += fmt::format("{:<{}}  {:>14}  {:>12}  {:>14}  {:>12}  {:>8}  {}  {}  {:>6}  {}\n", r.name, w,
                       num(r.a_result, 4), num(r.a_sd, 4), num(r.b_result, 4), num(r.b_sd, 4), num(r.ratio, 4), change,
                       flag, format_p(r.p_value), format_verdict(r));
  }
  return out;
}

std::string format_items(double x) {
  if (!std::isfinite(x)) return "NaN";
  return std::abs(x) >= 1000.0 ? fmt::format("{:.0f}", x) : fmt::format("{:.4g}", x);
}

std::string format_p(double p) {
  if (!std::isfinite(p)) return "-";
  return p < 0.0001 ? "<1e-4" : fmt::format("{:.4f}", p);
}

std::string format_verdict(const CompareRow& r) {
  return r.note.empty() ? r.verdict : fmt::format("{} ({})", r.verdict, r.note);
}

std::string format_instability(const Report& report) {
  std::string out;
  for (const BenchResult& b : report.benches) {
    if (!b.instability) continue;
    if (out.empty()) out = "Unstable (sd% above the rule; likely cause as measured, docs/report.md):\n";
    out += fmt::format("  {}: sd% {:.1f}% > {:g}%: {}\n", b.name, b.instability->sd_pct, b.instability->limit_pct,
                       b.instability->evidence);
  }
  return out;
}

std::string format_named_passes(const Report& report) {
  auto list = [](const std::vector<NamedValue>& vs) {
    std::string s;
    for (const NamedValue& v : vs) {
      s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", v.where, format_items(v.items_per_s));
    }
    return s;
  };
  std::string out;
  for (const BenchResult& b : report.benches) {
    if (b.dropped.empty() && b.outliers.empty()) continue;
    if (out.empty()) {
      out = "Passes left out or outside the spread (items/s; outside = beyond Tukey's fences, 1.5 IQR):\n";
    }
    std::string line = "  " + b.name + ":";
    if (!b.dropped.empty()) line += " trimmed mean drops " + list(b.dropped);
    if (!b.outliers.empty()) line += std::string(b.dropped.empty() ? "" : ";") + " outside " + list(b.outliers);
    out += line + "\n";
  }
  return out;
}

void ConsoleReporter::write(const Report& report, std::ostream& out) const {
  std::string runs;
  for (const std::string& r : report.runs) runs += (runs.empty() ? "" : " ") + r;
  out << fmt::format(
      "Suite {} | {} runs ({}) | targets: {}\n\n", report.suite, report.runs.size(), runs,
      report.targets.source.empty() ? "none" : report.targets.model + " (" + report.targets.source + ")");
  for (const std::string& line : report.info) out << "Note: " << line << "\n";
  if (!report.info.empty()) out << "\n";
  out << format_bench_table(report) << "--\n\n";
  out << format_statistics(report.stats, color_);
  out << format_score_line(report.stats);
  if (const std::string unstable = format_instability(report); !unstable.empty()) out << "\n" << unstable;
  if (const std::string named = format_named_passes(report); !named.empty()) out << "\n" << named;
  if (!report.stats.missing.empty()) {
    std::string list;
    for (const std::string& m : report.stats.missing) list += (list.empty() ? "" : ", ") + m;
    out << fmt::format("\nWithout {} runs of results: {}\n", report.min_runs, list);
  }
  bool header = false;
  for (const BenchResult& b : report.benches) {
    for (const std::string& reason : b.failure_reasons) {
      if (!header) out << "\nFailures:\n";
      header = true;
      out << fmt::format("  {}: {}\n", b.name, reason);
    }
  }
  const LoadNotes& n = report.notes;
  if (n.other_suite || n.unreadable || !n.warnings.empty()) {
    out << fmt::format("\nIgnored: {} report(s) of other suites, {} unreadable file(s)\n", n.other_suite, n.unreadable);
    for (const std::string& w : n.warnings) out << "  warning: " << w << "\n";
  }
  if (report.comparison) out << "\n" << format_comparison(*report.comparison, color_);
}

}  // namespace mlbench::report
