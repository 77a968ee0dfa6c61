// The end-of-run results table (see results_table.h).
#include "results_table.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/statistics.h"

namespace mlbench::runner {

namespace {
constexpr const char* kGreen = "\033[32m";
constexpr const char* kRed = "\033[31m";
constexpr const char* kReset = "\033[0m";

std::string paint(const std::string& text, const char* colour, bool color) {
  return color ? colour + text + kReset : text;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}
}  // namespace

std::string format_rate(double x) {
  if (!std::isfinite(x)) return "-";
  if (std::abs(x) >= 100) return fmt::format("{:.0f}", x);
  if (std::abs(x) >= 1) return fmt::format("{:.2f}", x);
  return fmt::format("{:.3g}", x);
}

ResultCells result_cells(const ResultRow& row) {
  ResultCells c;
  if (row.instances == 0) {
    c.passed = c.items = c.spread = c.stall = c.vs_target = "-";
    c.note = "not run";
    return c;
  }
  c.passed = fmt::format("{}/{}", row.passed, row.instances);
  const double mean = row.items_per_s.empty() ? NAN : core::mean(row.items_per_s);
  c.items = format_rate(mean);
  c.spread = row.items_per_s.size() >= 2 && mean > 0
                 ? fmt::format("±{:.1f}%", core::sd_sample(row.items_per_s) / mean * 100.0)
                 : "-";
  c.stall = row.stall_pct.empty() ? "-" : fmt::format("{:.1f}%", core::mean(row.stall_pct));
  c.vs_target = row.target && *row.target > 0 && std::isfinite(mean)
                    ? fmt::format("{:+.1f}%", (mean / *row.target - 1.0) * 100.0)
                    : "-";
  if (!row.failures.empty()) c.note = "FAILED " + join(row.failures, "; ");
  return c;
}

std::string format_results_table(const std::vector<ResultRow>& rows, bool color) {
  std::vector<ResultCells> cells;
  std::size_t w = std::string("benchmark").size();
  for (const auto& r : rows) {
    cells.push_back(result_cells(r));
    w = std::max(w, r.title.size());
  }
  // Fixed widths for the numbers; a colour code is added after padding so columns stay aligned.
  std::string out = fmt::format("{:<{}}  {:>7}  {:>10}  {:>7}  {:>7}  {:>9}\n", "benchmark", w, "passed", "items/s",
                                "spread", "stall", "vs target");
  out += std::string(w + 50, '-') + "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = rows[i];
    const ResultCells& c = cells[i];
    const bool ok = r.instances > 0 && r.passed == r.instances;
    const std::string passed = r.instances == 0 ? fmt::format("{:>7}", c.passed)
                                                : paint(fmt::format("{:>7}", c.passed), ok ? kGreen : kRed, color);
    std::string vs = fmt::format("{:>9}", c.vs_target);
    if (c.vs_target != "-") vs = paint(vs, c.vs_target[0] == '-' ? kRed : kGreen, color);
    std::string line =
        fmt::format("{:<{}}  {}  {:>10}  {:>7}  {:>7}  {}", r.title, w, passed, c.items, c.spread, c.stall, vs);
    if (!c.note.empty()) line += "  " + (r.failures.empty() ? c.note : paint(c.note, kRed, color));
    out += line + "\n";
  }
  return out;
}

}  // namespace mlbench::runner
