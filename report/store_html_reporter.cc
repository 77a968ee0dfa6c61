// The results store's views as one self-contained HTML page (store_reporters.h): inline CSS,
// SVG and a small script, and a Content-Security-Policy that forbids any network access, as
// the reports tree's page (html_reporter.cc). Per benchmark one trend chart (items/s over its
// runs, one line per machine, failed runs marked) and its runs' table; the machines table.
#include <cmath>
#include <map>
#include <ostream>

#include <fmt/format.h>

#include "core/html.h"
#include "report/reporter.h"
#include "report/store_reporters.h"
#include "report/svg_charts.h"

namespace mlbench::report {
namespace {

constexpr const char* kStyle = R"(
body{font-family:sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f0f0f0}
td.text,th.text{text-align:left}
.note{color:#555}.chart{display:block;margin:8px 0 8px}
.regression{color:#c62828;font-weight:bold}.improvement{color:#1a7f37;font-weight:bold}
tr.failed td{background:#fff0f0}
)";

// Records any script error on <body> so a headless browser's DOM dump shows it; counts the
// trend charts the browser sees; marks the page rendered last.
constexpr const char* kScript = R"(
window.addEventListener('error', function (e) {
  document.body.setAttribute('data-js-errors', (document.body.getAttribute('data-js-errors') || '') + e.message + ';');
});
(function () {
  document.body.setAttribute('data-trend-charts', String(document.querySelectorAll('svg.trend').length));
  document.body.setAttribute('data-failed-runs', String(document.querySelectorAll('svg.trend g.failed-run').length));
  document.body.setAttribute('data-rendered', 'ok');
})();
)";

std::string esc(const std::string& s) {
  return core::html_escape(s);
}

std::string cell(double x, const char* spec = "{:.1f}") {
  return std::isfinite(x) ? fmt::format("<td data-v=\"{:.17g}\">{}</td>", x, fmt::format(fmt::runtime(spec), x))
                          : "<td data-v=\"\">-</td>";
}

void write_series_table(const HistorySeries& s, std::ostream& out) {
  out << fmt::format("<h3>{} on {}</h3>\n", esc(s.bench), esc(s.machine_label))
      << fmt::format(
             "<table class=\"history\" data-bench=\"{}\" data-machine=\"{}\"><thead><tr><th class=\"text\">"
             "when</th><th class=\"text\">run</th><th>passes</th><th>items/s</th><th>sd%</th><th>min</th>"
             "<th>max</th><th>stall%</th><th class=\"text\">time per item</th><th>failed</th>"
             "<th class=\"text\">change</th></tr></thead><tbody>\n",
             esc(s.bench), esc(s.machine));
  for (const HistoryRun& r : s.runs) {
    const std::string verdict = r.change ? r.change->verdict : "";
    out << (r.failures ? "<tr class=\"failed\">" : "<tr>") << "<td class=\"text\">" << esc(format_when(r.when))
        << "</td><td class=\"text\">" << esc(r.run_id) << "</td>" << fmt::format("<td>{}</td>", r.pass_values.size())
        << cell(r.items_per_s, "{:.4g}") << cell(r.sd_pct) << cell(r.min_pass, "{:.4g}") << cell(r.max_pass, "{:.4g}")
        << cell(r.stall_pct) << "<td class=\"text\">" << esc(format_time_split(r.time)) << "</td>"
        << fmt::format("<td>{}</td>", r.failures)
        << fmt::format("<td class=\"text {}\" data-verdict=\"{}\">{}</td></tr>\n", esc(verdict), esc(verdict),
                       esc(r.change ? r.change->text : ""));
  }
  out << "</tbody></table>\n";
  std::string failures;
  for (const HistoryRun& r : s.runs) {
    for (const std::string& why : r.failure_reasons) failures += "<li>" + esc(r.run_id + " " + why) + "</li>";
  }
  if (!failures.empty()) out << "<ul class=\"failures\">" << failures << "</ul>\n";
}

void write_history(const History& h, std::ostream& out) {
  out << "<h2>History" << (h.bench.empty() ? "" : " of " + esc(h.bench)) << "</h2>\n"
      << "<p class=\"note\">Per benchmark and machine, its runs in time order; items/s = mean of the passes; each "
         "run after the first against the runs before it on that machine (Mann-Whitney U, alpha 0.05, with 4 passes "
         "a side; with fewer, by size: beyond 5% and outside the earlier passes). A red ring marks a run with a "
         "failed instance, a red cross one without any value.</p>\n";
  if (h.series.empty()) out << "<p class=\"note\">No run in the store.</p>\n";
  std::map<std::string, std::vector<const HistorySeries*>> by_bench;
  for (const HistorySeries& s : h.series) by_bench[s.bench].push_back(&s);
  for (const auto& [bench, series] : by_bench) {
    std::vector<TrendSeries> trend;
    for (const HistorySeries* s : series) {
      TrendSeries t;
      t.label = s->machine_label;
      for (const HistoryRun& r : s->runs) {
        t.points.push_back({r.run_id, r.when, r.items_per_s, r.failures, r.change ? r.change->verdict : ""});
      }
      trend.push_back(std::move(t));
    }
    out << "<section class=\"bench\" data-bench=\"" << esc(bench) << "\"><h2>" << esc(bench) << "</h2>\n"
        << trend_svg(bench, trend) << "\n";
    for (const HistorySeries* s : series) write_series_table(*s, out);
    out << "</section>\n";
  }
}

void write_machines(const MachinesView& v, std::ostream& out) {
  out << "<h2>Machines</h2>\n<p class=\"note\">Per benchmark the latest run on each machine: items/s (x the "
         "fastest machine), stall %, and the verdict of the benchmark's stall analysis on that machine.</p>\n"
      << "<table id=\"machines\"><thead><tr><th class=\"text\">bench</th>";
  for (const MachineColumn& m : v.machines) {
    out << "<th class=\"text\" data-machine=\"" << esc(m.fingerprint) << "\">" << esc(m.label) << "</th>";
  }
  out << "</tr></thead><tbody>\n";
  for (const MachinesRow& row : v.rows) {
    out << "<tr><td class=\"text\">" << esc(row.bench) << "</td>";
    for (const MachineColumn& m : v.machines) {
      const auto it = row.cells.find(m.fingerprint);
      if (it == row.cells.end()) {
        out << "<td>-</td>";
        continue;
      }
      const MachineCell& c = it->second;
      out << fmt::format("<td data-v=\"{}\" title=\"run {} ({})\">{} items/s (x{:.2f}), {}% stall{}{}</td>",
                         std::isfinite(c.items_per_s) ? fmt::format("{:.17g}", c.items_per_s) : "", esc(c.run_id),
                         esc(c.when), format_items(c.items_per_s), c.relative,
                         std::isfinite(c.stall_pct) ? fmt::format("{:.1f}", c.stall_pct) : "-",
                         c.failures ? fmt::format(", {} failed", c.failures) : "",
                         c.verdict.empty() ? "" : ", " + esc(c.verdict));
    }
    out << "</tr>\n";
  }
  out << "</tbody></table>\n";
}

}  // namespace

void StoreHtmlReporter::write(const StoreView& view, std::ostream& out) const {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
         "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
      << "<title>mlbench results store: " << esc(view.store) << "</title>\n<style>" << kStyle << "</style></head>\n"
      << "<body>\n<h1>mlbench results store</h1>\n<p class=\"note\">" << esc(view.store) << "</p>\n";
  for (const std::string& n : view.notes) out << "<p class=\"note info\">" << esc(n) << "</p>\n";
  if (view.history) write_history(*view.history, out);
  if (view.machines) write_machines(*view.machines, out);
  out << "<script>" << kScript << "</script>\n</body></html>\n";
}

}  // namespace mlbench::report
