// The HTML export: one self-contained page (inline CSS, SVG and script; a
// Content-Security-Policy that forbids any network access) with the table,
// the suite statistics and the charts; mlbench-stall's charts are embedded as
// data: images so their ids and styles cannot clash with the page.
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "core/html.h"
#include "report/reporter.h"
#include "report/significance.h"
#include "report/svg_charts.h"

namespace mlbench::report {
namespace {
std::string cell(double x, int decimals) {
  return std::isfinite(x) ? fmt::format("<td data-v=\"{:.17g}\">{:.{}f}</td>", x, x, decimals)
                          : "<td data-v=\"\">NaN</td>";
}
// min-max of the run values; sorts by the relative width (max - min) / result.
std::string spread_cell(const BenchResult& b) {
  if (!std::isfinite(b.min_run) || !std::isfinite(b.max_run)) return "<td data-v=\"\">NaN</td>";
  const double width = std::isfinite(b.result) && b.result > 0.0 ? (b.max_run - b.min_run) / b.result : kNaN;
  return fmt::format("<td data-v=\"{}\">{} – {}</td>", std::isfinite(width) ? fmt::format("{:.17g}", width) : "",
                     format_items(b.min_run), format_items(b.max_run));
}
std::string places(const std::vector<NamedValue>& vs) {
  std::string s;
  for (const NamedValue& v : vs) {
    s += fmt::format("{}{} ({}: {})", s.empty() ? "" : ", ", v.where, format_items(v.items_per_s), v.why);
  }
  return core::html_escape(s);
}
std::string pass_cell(bool pass) {
  return fmt::format("<td class=\"{}\">{}</td>", pass ? "pass" : "fail", pass ? "True" : "False");
}

constexpr const char* kStyle = R"(
body{font-family:sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f0f0f0;cursor:pointer}
td:first-child,th:first-child{text-align:left}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#c62828;font-weight:bold}
.note{color:#555}.chart{display:block;margin:8px 0 24px}
.stall-charts img{max-width:48%;margin-right:1%;border:1px solid #ddd}
tr.unstable td{background:#fff4e0}.stability{text-align:left}
tr.straggler td{background:#fde8e8}
)";

// Sorts the results table by a clicked header; records any script error on <body>
// so a headless browser's DOM dump shows it.
constexpr const char* kScript = R"(
window.addEventListener('error', function (e) {
  document.body.setAttribute('data-js-errors', (document.body.getAttribute('data-js-errors') || '') + e.message + ';');
});
(function () {
  var table = document.getElementById('results');
  var headers = table.tHead.rows[0].cells;
  for (var c = 0; c < headers.length; c++) {
    (function (col) {
      headers[col].addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = headers[col].getAttribute('data-order') !== 'asc';
        rows.sort(function (a, b) {
          var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
          if (x === null) { x = a.cells[col].textContent; y = b.cells[col].textContent; return asc ? x.localeCompare(y) : y.localeCompare(x); }
          x = x === '' ? -Infinity : parseFloat(x); y = y === '' ? -Infinity : parseFloat(y);
          return asc ? x - y : y - x;
        });
        rows.forEach(function (r) { body.appendChild(r); });
        headers[col].setAttribute('data-order', asc ? 'asc' : 'desc');
      });
    })(c);
  }
  document.body.setAttribute('data-bar-groups', String(document.querySelectorAll('g.bar-group').length));
  document.body.setAttribute('data-rendered', 'ok');
})();
)";
}  // namespace

namespace {

// The page's head, title and the line naming the runs and targets; the report's notes.
void write_head(const Report& report, std::ostream& out) {
  std::string runs;
  for (const std::string& r : report.runs) runs += (runs.empty() ? "" : " ") + r;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
         "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
      << "<title>mlbench report: " << core::html_escape(report.suite) << "</title>\n<style>" << kStyle
      << "</style></head>\n"
      << "<body>\n<h1>mlbench report: " << core::html_escape(report.suite) << "</h1>\n"
      << fmt::format("<p class=\"note\">{} runs ({}) from {}; targets: {}{}</p>\n", report.runs.size(),
                     core::html_escape(runs), core::html_escape(report.reports_dir),
                     report.targets.source.empty()
                         ? "none"
                         : core::html_escape(report.targets.model + " (" + report.targets.source + ")"),
                     report.targets.note.empty() ? "" : " — " + core::html_escape(report.targets.note));

  for (const std::string& line : report.info) {
    out << "<p class=\"note info\">Note: " << core::html_escape(line) << "</p>\n";
  }
}

// The results table, one row a benchmark.
void write_results(const Report& report, std::ostream& out) {
  out << "<h2>Results</h2>\n<p class=\"note\">items/s; result = mean of the run values without the min and max run; "
         "sd = sample sd over runs; sd% = sd/result; spread = lowest – highest run value; diff = result/target - 1; "
         "stability: a highlighted row fails the sd% rule, with its likely cause as measured. Click a header to "
         "sort.</p>\n"
      << "<table id=\"results\"><thead><tr><th>bench</th><th>target</th><th>result</th><th>sd</th><th>sd%</th>"
         "<th>spread (min – max)</th><th>diff</th><th>n</th><th>fail</th><th>stall%</th><th>fetch%</th><th>prep%</th>"
         "<th class=\"stability\">stability</th></tr></thead><tbody>\n";
  for (const BenchResult& b : report.benches) {
    out << (b.instability ? "<tr class=\"unstable\"><td>" : "<tr><td>") << core::html_escape(b.name) << "</td>"
        << cell(b.target ? b.target->items_per_s : kNaN, 2) << cell(b.result, 4) << cell(b.sd, 4)
        << cell(b.sd_frac * 100.0, 3) << spread_cell(b) << cell(b.diff * 100.0, 2)
        << fmt::format("<td data-v=\"{0}\">{0}</td><td data-v=\"{1}\">{1}</td>", b.n, b.failures)
        << cell(b.stall_pct, 2) << cell(b.analysis ? b.analysis->fetch_pct : kNaN, 2)
        << cell(b.analysis ? b.analysis->prep_pct : kNaN, 2)
        << (b.instability
                ? fmt::format("<td class=\"stability\" title=\"{}\">unstable: {}</td>",
                              core::html_escape(b.instability->evidence), core::html_escape(b.instability->cause))
                : std::string(std::isfinite(b.sd_frac) ? "<td class=\"stability\">ok</td>"
                                                       : "<td class=\"stability\"></td>"))
        << "</tr>\n";
  }
  out << "</tbody></table>\n<p class=\"note\">sd% and diff in this table are in percent.</p>\n";
}

// The unstable benchmarks and the passes left out or outside the spread.
void write_unstable_and_named(const Report& report, std::ostream& out) {
  bool unstable_header = false;
  for (const BenchResult& b : report.benches) {
    if (!b.instability) continue;
    if (!unstable_header) out << "<h3>Unstable</h3><ul id=\"unstable\">\n";
    unstable_header = true;
    out << fmt::format("<li data-bench=\"{}\" data-cause=\"{}\">{}: sd% {:.1f}% &gt; {:g}%: {}</li>\n",
                       core::html_escape(b.name), core::html_escape(b.instability->cause), core::html_escape(b.name),
                       b.instability->sd_pct, b.instability->limit_pct, core::html_escape(b.instability->evidence));
  }
  if (unstable_header) out << "</ul>\n";
  bool named_header = false;
  for (const BenchResult& b : report.benches) {
    if (b.dropped.empty() && b.outliers.empty()) continue;
    if (!named_header) {
      out << "<h3>Passes left out or outside the spread</h3><p class=\"note\">The trimmed mean drops the lowest and "
             "highest pass; outside = beyond Tukey's fences (Q1 - 1.5 IQR, Q3 + 1.5 IQR) over the instances "
             "(R&lt;k&gt;/D&lt;slot&gt;) and, with several slots, over the passes (R&lt;k&gt;).</p><ul id=\"named\">\n";
    }
    named_header = true;
    out << "<li data-bench=\"" << core::html_escape(b.name) << "\">" << core::html_escape(b.name) << ":";
    if (!b.dropped.empty()) out << " dropped " << places(b.dropped);
    if (!b.outliers.empty()) out << (b.dropped.empty() ? "" : ";") << " outside " << places(b.outliers);
    out << "</li>\n";
  }
  if (named_header) out << "</ul>\n";
}

// The Mila statistics, the score and the problems.
void write_statistics(const Report& report, std::ostream& out) {
  const SuiteStatistics& s = report.stats;
  auto pct = [](double x) { return std::isfinite(x) ? fmt::format("{:+.4f} %", x) : std::string("n/a"); };
  out << "<h2>Statistics</h2>\n<table id=\"statistics\"><thead><tr><th>Statistic</th><th>Value</th><th>Pass</th></tr>"
         "</thead><tbody>\n"
      << "<tr><td>Bench Passes</td><td></td>" << pass_cell(s.bench_passes) << "</tr>\n"
      << "<tr><td>Deviation Quantile (80%)</td><td>" << pct(s.deviation_q80_pct) << "</td>"
      << pass_cell(s.deviation_passes) << "</tr>\n"
      << "<tr><td>Performance</td><td>" << pct(s.performance_pct) << "</td>" << pass_cell(s.performance_passes)
      << "</tr>\n</tbody></table>\n"
      << fmt::format(
             "<p id=\"score\">Score: geometric mean of result/target {} over {} benches; failure rate {} ({} of {} "
             "instances); milabench score {}</p>\n",
             std::isfinite(s.geomean_ratio) ? fmt::format("{:.4f}", s.geomean_ratio) : "n/a", s.ratio_benches,
             std::isfinite(s.failure_rate) ? fmt::format("{:.2f} %", s.failure_rate * 100.0) : "n/a",
             s.failed_instances, s.total_instances,
             std::isfinite(s.milabench_score) ? fmt::format("{:.4f}", s.milabench_score) : "n/a");
  if (!s.missing.empty() || !s.failed.empty()) {
    out << "<h3>Problems</h3><ul>\n";
    for (const std::string& m : s.missing) {
      out << "<li>" << core::html_escape(m) << ": fewer than " << report.min_runs << " runs with results</li>\n";
    }
    for (const BenchResult& b : report.benches) {
      for (const std::string& r : b.failure_reasons) out << "<li>" << core::html_escape(b.name + " " + r) << "</li>\n";
    }
    out << "</ul>\n";
  }
}

// The charts of the whole suite.
void write_charts(const Report& report, std::ostream& out) {
  out << "<h2>Where the time went</h2>\n<p class=\"note\">One bar per benchmark: compute / fetch stall / prep stall "
         "from mlbench-stall where an analysis exists, otherwise compute / copy / data wait measured per iteration "
         "in the reports.</p>\n"
      << time_split_svg(report.benches) << "\n"
      << "<h2>Result against target</h2>\n"
      << result_svg(report.benches) << "\n"
      << "<h2>Per-run items/s</h2>\n"
      << drift_svg(report.benches, report.runs) << "\n";
}

// A job of several ranks (stall.json's `ranks` and `job`): the ranks side by side, a row each
// (its step split, its cause, the steps it was late), the straggler named, and a bar per rank.
void write_ranks(const std::string& bench, const StallAnalysis& a, std::ostream& out) {
  if (!a.ranks.is_array() || !a.job.is_object()) return;
  const auto& job = a.job;
  const nlohmann::json straggler = job.value("straggler", nlohmann::json());
  const auto pct = [](const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? cell(j[key].get<double>(), 1)
                                                                  : std::string("<td data-v=\"\">–</td>");
  };
  out << "<h4>Ranks of the job</h4>\n<p class=\"job-line\"><strong>"
      << core::html_escape(job.value("text", std::string())) << "</strong></p>\n";
  if (const auto split = job.value("split", nlohmann::json()); split.is_object()) {
    out << fmt::format(
        "<p class=\"note job-split\">the job ({} ranks, a step of {:.1f} ms, the slowest rank's): compute {:.1f}%, "
        "prep stall {:.1f}%, fetch stall {:.1f}%, sync wait {:.1f}% of the ranks' time</p>\n",
        job.value("ranks", 0), job.value("step_ms", 0.0), split.value("compute_pct", 0.0), split.value("prep_pct", 0.0),
        split.value("fetch_pct", 0.0), split.value("sync_pct", 0.0));
  }
  out << "<table class=\"ranks\" data-bench=\"" << core::html_escape(bench)
      << "\"><thead><tr><th>rank</th><th>host</th><th>samples/s</th><th>compute%</th><th>prep%</th><th>fetch%</th>"
         "<th>data wait%</th><th>sync%</th><th>cause</th><th>late steps</th></tr></thead><tbody>\n";
  for (const auto& r : a.ranks) {
    if (!r.is_object()) continue;
    const int rank = r.value("rank", 0);
    const bool late = straggler.is_number_integer() && straggler.get<int>() == rank;
    const auto split = r.value("split", nlohmann::json());
    const auto cause = r.value("cause", nlohmann::json());
    const auto steps = r.value("late_steps", nlohmann::json());
    out << "<tr data-rank=\"" << rank << "\"" << (late ? " class=\"straggler\"" : "") << "><td>rank " << rank
        << (late ? " (straggler)" : "") << "</td><td>" << core::html_escape(r.value("host", std::string())) << "</td>"
        << pct(r, "rate") << (split.is_object() ? pct(split, "compute_pct") : pct(r, "compute_pct"))
        << pct(split, "prep_pct") << pct(split, "fetch_pct") << pct(r, "wait_pct")
        << (split.is_object() ? pct(split, "sync_pct") : pct(r, "sync_pct")) << "<td>"
        << (cause.is_string() ? core::html_escape(cause.get<std::string>()) : std::string("–")) << "</td><td>"
        << (steps.is_number_integer() ? fmt::format("{} of {}", steps.get<int>(), job.value("steps", 0))
                                      : std::string("–"))
        << "</td></tr>\n";
  }
  out << "</tbody></table>\n" << ranks_svg(bench, a.ranks, a.job) << "\n";
}

// Each mlbench-stall analysis: its self-check, what it told its user, its charts.
void write_stall_analyses(const Report& report, std::ostream& out) {
  bool any = false;
  for (const BenchResult& b : report.benches) {
    if (!b.analysis || (b.analysis->split_svg.empty() && b.analysis->whatif_svg.empty() && b.analysis->job.is_null())) {
      continue;
    }
    if (!any) out << "<h2>Stall analyses (mlbench-stall)</h2>\n";
    any = true;
    out << "<h3>" << core::html_escape(b.name) << "</h3>";
    if (!b.analysis->self_check_text.empty()) {
      out << "<p class=\"note\">" << core::html_escape(b.analysis->self_check_text) << "</p>";
    }
    // What the analysis told its user to act on, as the console said it.
    if (!b.analysis->verdict.empty() || !b.analysis->remedy_text.empty()) {
      out << "<ul class=\"advice\">";
      if (!b.analysis->verdict.empty()) out << "<li>verdict: " << core::html_escape(b.analysis->verdict) << "</li>";
      if (!b.analysis->remedy_text.empty()) {
        out << "<li>remedy: " << core::html_escape(b.analysis->remedy_text) << "</li>";
      }
      for (const std::string& a : b.analysis->advice) out << "<li>advice: " << core::html_escape(a) << "</li>";
      out << "</ul>";
    }
    write_ranks(b.name, *b.analysis, out);
    out << "<div class=\"stall-charts\">";
    for (const auto& [svg, what] : {std::pair{&b.analysis->split_svg, "split"}, {&b.analysis->whatif_svg, "what-if"}}) {
      if (svg->empty()) continue;
      out << fmt::format("<img alt=\"{} chart of {}\" src=\"data:image/svg+xml;base64,{}\">", what,
                         core::html_escape(b.name), core::base64(*svg));
    }
    out << "</div>\n";
  }
}

// --compare's table.
void write_comparison(const Report& report, std::ostream& out) {
  if (report.comparison) {
    out << "<h2>Compared with " << core::html_escape(report.comparison->other_dir) << "</h2>\n"
        << fmt::format(
               "<p class=\"note\">verdict and p: two-sided Mann-Whitney U test ({}) over the per-pass "
               "values of both sides, alpha = {}; faster or slower only when p &lt; alpha.</p>\n",
               kSignificanceTest, kSignificanceAlpha)
        << "<table id=\"comparison\"><thead><tr><th>bench</th><th>this</th><th>sd</th><th>other</th><th>sd</th>"
           "<th>ratio</th><th>change %</th><th>p</th><th>verdict</th><th>beyond combined sd</th></tr></thead>"
           "<tbody>\n";
    for (const CompareRow& r : report.comparison->rows) {
      const char* verdict_class = !r.significant ? "" : r.verdict == "faster" ? " class=\"pass\"" : " class=\"fail\"";
      out << "<tr><td>" << core::html_escape(r.name) << "</td>" << cell(r.a_result, 4) << cell(r.a_sd, 4)
          << cell(r.b_result, 4) << cell(r.b_sd, 4) << cell(r.ratio, 4) << cell(r.change_pct, 2) << cell(r.p_value, 4)
          << "<td" << verdict_class << " data-significant=\"" << (r.significant ? "1" : "0") << "\">"
          << core::html_escape(format_verdict(r)) << "</td>" << (r.beyond_combined_sd ? "<td>yes</td>" : "<td>no</td>")
          << "</tr>\n";
    }
    out << "</tbody></table>\n";
  }
}

}  // namespace

void HtmlReporter::write(const Report& report, std::ostream& out) const {
  write_head(report, out);
  write_results(report, out);
  write_unstable_and_named(report, out);
  write_statistics(report, out);
  write_charts(report, out);
  write_stall_analyses(report, out);
  write_comparison(report, out);
  out << "<script>" << kScript << "</script>\n</body></html>\n";
}

}  // namespace mlbench::report
