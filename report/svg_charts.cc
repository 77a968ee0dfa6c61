#include "report/svg_charts.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "core/html.h"

namespace mlbench::report {
namespace {
constexpr int kWidth = 960;
constexpr int kLabel = 220;  // room for the bench name
constexpr int kPlot = 520;   // the bar area (room on the right for a label)
constexpr int kRow = 26;
constexpr int kTop = 34;

struct Segment {
  const char* name;
  const char* color;
  double frac;
};

std::string legend(const std::vector<std::pair<const char*, const char*>>& items) {
  std::string out;
  int x = kLabel;
  for (const auto& [name, color] : items) {
    out += fmt::format(R"(<rect x="{}" y="8" width="12" height="12" fill="{}"/><text x="{}" y="19">{}</text>)", x,
                       color, x + 16, name);
    x += 24 + 8 * static_cast<int>(std::string(name).size());
  }
  return out;
}

std::string svg_open(int rows, const char* title) {
  const int height = kTop + rows * kRow + 24;
  return fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{0}" height="{1}" )"
                     R"(viewBox="0 0 {0} {1}" role="img" aria-label="{2}" font-family="sans-serif" font-size="12">)",
                     kWidth, height, title);
}
}  // namespace

std::string time_split_svg(const std::vector<BenchResult>& benches) {
  std::string out = svg_open(static_cast<int>(benches.size()), "Where the time went, per benchmark");
  out += legend({{"compute", "#4e79a7"},
                 {"fetch stall", "#e15759"},
                 {"prep stall", "#f28e2b"},
                 {"copy (h2d)", "#76b7b2"},
                 {"data wait", "#b07aa1"}});
  int row = 0;
  for (const BenchResult& b : benches) {
    const int y = kTop + row++ * kRow;
    std::vector<Segment> segs;
    std::string source;
    if (b.analysis && std::isfinite(b.analysis->compute_pct)) {
      segs = {{"compute", "#4e79a7", b.analysis->compute_pct / 100.0},
              {"fetch stall", "#e15759", b.analysis->fetch_pct / 100.0},
              {"prep stall", "#f28e2b", b.analysis->prep_pct / 100.0}};
      source = "mlbench-stall";
    } else if (std::isfinite(b.compute_frac)) {
      segs = {{"compute", "#4e79a7", b.compute_frac},
              {"copy (h2d)", "#76b7b2", b.h2d_frac},
              {"data wait", "#b07aa1", b.wait_frac}};
      source = "reports";
    }
    out += fmt::format(R"(<g class="bar-group" data-bench="{0}" data-source="{1}"><text x="{2}" y="{3}" )"
                       R"(text-anchor="end">{0}</text>)",
                       core::html_escape(b.name), source.empty() ? "none" : source, kLabel - 8, y + 15);
    if (segs.empty()) {
      out += fmt::format(R"(<text x="{}" y="{}" fill="#888">no timing data</text>)", kLabel, y + 15);
    }
    double x = kLabel;
    for (const Segment& s : segs) {
      const double f = std::isfinite(s.frac) ? std::clamp(s.frac, 0.0, 1.0) : 0.0;
      const double w = f * kPlot;
      out += fmt::format(R"(<rect class="segment" x="{:.2f}" y="{}" width="{:.2f}" height="18" fill="{}">)"
                         R"(<title>{} {}: {:.1f} %</title></rect>)",
                         x, y + 2, w, s.color, core::html_escape(b.name), s.name, f * 100.0);
      x += w;
    }
    if (!segs.empty()) {
      const double stall = segs.size() == 3 && source == "mlbench-stall"
                               ? (segs[1].frac + segs[2].frac) * 100.0
                               : (std::isfinite(b.stall_pct) ? b.stall_pct : segs[2].frac * 100.0);
      out +=
          fmt::format(R"(<text x="{}" y="{}">{:.1f} % stall ({})</text>)", kLabel + kPlot + 8, y + 15, stall, source);
    }
    out += "</g>";
  }
  return out + "</svg>";
}

std::string ranks_svg(const std::string& bench, const nlohmann::json& ranks, const nlohmann::json& job) {
  if (!ranks.is_array() || ranks.empty()) return "";
  const auto number = [](const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
  };
  const nlohmann::json straggler = job.is_object() ? job.value("straggler", nlohmann::json()) : nlohmann::json();
  std::string out = svg_open(static_cast<int>(ranks.size()), "Each rank's step");
  out += legend({{"compute", "#4e79a7"},
                 {"prep stall", "#f28e2b"},
                 {"fetch stall", "#e15759"},
                 {"data wait", "#b07aa1"},
                 {"sync wait", "#9c9c9c"}});
  int row = 0;
  for (const auto& r : ranks) {
    const int y = kTop + row++ * kRow;
    const int rank = r.is_object() && r.contains("rank") && r["rank"].is_number_integer() ? r["rank"].get<int>() : 0;
    const bool late = straggler.is_number_integer() && straggler.get<int>() == rank;
    const auto split = r.is_object() ? r.value("split", nlohmann::json()) : nlohmann::json();
    std::vector<Segment> segs;
    if (split.is_object()) {
      segs = {{"compute", "#4e79a7", number(split, "compute_pct") / 100},
              {"prep stall", "#f28e2b", number(split, "prep_pct") / 100},
              {"fetch stall", "#e15759", number(split, "fetch_pct") / 100},
              {"sync wait", "#9c9c9c", number(split, "sync_pct") / 100}};
    } else {
      segs = {{"compute", "#4e79a7", number(r, "compute_pct") / 100},
              {"data wait", "#b07aa1", number(r, "wait_pct") / 100},
              {"sync wait", "#9c9c9c", number(r, "sync_pct") / 100}};
    }
    out += fmt::format(R"(<g class="rank-bar" data-bench="{0}" data-rank="{1}"{2}><text x="{3}" y="{4}" )"
                       R"(text-anchor="end">rank {1}{5}</text>)",
                       core::html_escape(bench), rank, late ? R"( data-straggler="1")" : "", kLabel - 8, y + 15,
                       late ? " (straggler)" : "");
    double x = kLabel;
    for (const Segment& s : segs) {
      const double f = std::isfinite(s.frac) ? std::clamp(s.frac, 0.0, 1.0) : 0.0;
      const double w = f * kPlot;
      out += fmt::format(R"(<rect class="segment" x="{:.2f}" y="{}" width="{:.2f}" height="18" fill="{}">)"
                         R"(<title>rank {} {}: {:.1f} %</title></rect>)",
                         x, y + 2, w, s.color, rank, s.name, f * 100.0);
      x += w;
    }
    out += fmt::format(R"(<text x="{}" y="{}">{:.1f} samples/s</text>)", kLabel + kPlot + 8, y + 15, number(r, "rate"));
    out += "</g>";
  }
  return out + "</svg>";
}

std::string result_svg(const std::vector<BenchResult>& benches) {
  // Scale: ratios up to the largest max-run ratio, at least 1.25 so the target line shows.
  // Only a target gives a ratio: a bench without one gets "no target", never a bar at 100 %.
  auto ref = [](const BenchResult& b) { return b.target ? b.target->items_per_s : kNaN; };
  double top = 1.25;
  for (const BenchResult& b : benches) {
    const double r = ref(b);
    if (std::isfinite(b.max_run) && std::isfinite(r) && r > 0) top = std::max(top, b.max_run / r * 1.05);
  }
  auto px = [&](double ratio) { return kLabel + std::clamp(ratio / top, 0.0, 1.0) * kPlot; };
  std::string out = svg_open(static_cast<int>(benches.size()), "Result against target with run-to-run spread");
  out += legend({{"result / target", "#59a14f"}, {"± sd", "#2f5f2a"}, {"min..max run", "#333333"}});
  const int bottom = kTop + static_cast<int>(benches.size()) * kRow;
  out += fmt::format(R"(<line x1="{0:.2f}" y1="{1}" x2="{0:.2f}" y2="{2}" stroke="#e15759" stroke-dasharray="4 3"/>)"
                     R"(<text x="{0:.2f}" y="{3}" text-anchor="middle" fill="#e15759">target</text>)",
                     px(1.0), kTop - 2, bottom, bottom + 14);
  int row = 0;
  for (const BenchResult& b : benches) {
    const int y = kTop + row++ * kRow;
    const double r = ref(b);
    out += fmt::format(R"(<g class="result-group" data-bench="{0}"><text x="{1}" y="{2}" text-anchor="end">{0}</text>)",
                       core::html_escape(b.name), kLabel - 8, y + 15);
    if (std::isfinite(b.result) && std::isfinite(r) && r > 0) {
      const double ratio = b.result / r;
      out += fmt::format(R"(<rect x="{}" y="{}" width="{:.2f}" height="14" fill="#59a14f"><title>{}: {:.4g} items/s, )"
                         R"({:.1f} % of target</title></rect>)",
                         kLabel, y + 4, px(ratio) - kLabel, core::html_escape(b.name), b.result, ratio * 100.0);
      if (std::isfinite(b.sd)) {
        const double lo = px((b.result - b.sd) / r), hi = px((b.result + b.sd) / r);
        out += fmt::format(R"(<rect x="{:.2f}" y="{}" width="{:.2f}" height="8" fill="#2f5f2a"/>)", lo, y + 7,
                           std::max(1.0, hi - lo));
      }
      if (std::isfinite(b.min_run) && std::isfinite(b.max_run)) {
        out += fmt::format(R"(<line x1="{:.2f}" y1="{}" x2="{:.2f}" y2="{}" stroke="#333"/>)", px(b.min_run / r),
                           y + 11, px(b.max_run / r), y + 11);
      }
      out += fmt::format(R"(<text x="{}" y="{}">{:+.1f} %</text>)", kLabel + kPlot + 8, y + 15, (ratio - 1.0) * 100.0);
    } else if (std::isfinite(b.result) && !(std::isfinite(r) && r > 0)) {
      out += fmt::format(R"(<text x="{}" y="{}" fill="#888" class="no-target">no target ({:.4g} items/s)</text>)",
                         kLabel, y + 15, b.result);
    } else {
      out += fmt::format(R"(<text x="{}" y="{}" fill="#888">no result</text>)", kLabel, y + 15);
    }
    out += "</g>";
  }
  return out + "</svg>";
}

std::string drift_svg(const std::vector<BenchResult>& benches, const std::vector<std::string>& runs) {
  // Each row: points at run index, height = run value / result, band from 0.9 to 1.1.
  std::string out = svg_open(static_cast<int>(benches.size()), "Items per second per run (drift)");
  out += legend({{"run value / result (row spans ±20 %)", "#4e79a7"}});
  const double step = runs.size() > 1 ? static_cast<double>(kPlot) / static_cast<double>(runs.size() - 1) : 0.0;
  int row = 0;
  for (const BenchResult& b : benches) {
    const int y = kTop + row++ * kRow;
    out += fmt::format(R"(<g class="drift-group" data-bench="{0}"><text x="{1}" y="{2}" text-anchor="end">{0}</text>)"
                       R"(<rect x="{3}" y="{4}" width="{5}" height="{6}" fill="#eef2f7"/>)",
                       core::html_escape(b.name), kLabel - 8, y + 15, kLabel, y + 3, kPlot, 20);
    std::string points;
    for (const RunValue& rv : b.runs) {
      const auto it = std::find(runs.begin(), runs.end(), rv.run);
      if (it == runs.end() || !std::isfinite(rv.items_per_s) || !std::isfinite(b.result) || b.result <= 0) continue;
      const double x = kLabel + step * static_cast<double>(it - runs.begin());
      // ±20 % of the result spans the row; beyond it the point sits on the edge.
      const double rel = std::clamp(rv.items_per_s / b.result - 1.0, -0.2, 0.2);
      const double py = y + 13 - rel / 0.2 * 10.0;
      points += fmt::format("{:.2f},{:.2f} ", x, py);
      out += fmt::format(
          R"(<circle cx="{:.2f}" cy="{:.2f}" r="3" fill="#4e79a7"><title>{} {}: {:.4g} items/s</title></circle>)", x,
          py, core::html_escape(b.name), rv.run, rv.items_per_s);
    }
    if (!points.empty()) out += fmt::format(R"(<polyline points="{}" fill="none" stroke="#4e79a7"/>)", points);
    out += "</g>";
  }
  return out + "</svg>";
}

std::string trend_svg(const std::string& bench, const std::vector<TrendSeries>& series) {
  constexpr int kLeft = 70, kPlotW = 760, kPlotTop = 40, kPlotH = 180;
  constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948"};
  // x: the runs of every machine in time order; y: 0 .. the largest items/s (+10 %).
  std::vector<std::pair<std::string, std::string>> order;  // (when, run id)
  double top = 0.0;
  for (const TrendSeries& s : series) {
    for (const TrendPoint& p : s.points) {
      order.emplace_back(p.when, p.run_id);
      if (std::isfinite(p.items_per_s)) top = std::max(top, p.items_per_s);
    }
  }
  std::sort(order.begin(), order.end());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  top = top > 0.0 ? top * 1.1 : 1.0;
  const double step = order.size() > 1 ? static_cast<double>(kPlotW) / static_cast<double>(order.size() - 1) : 0.0;
  auto px = [&](const TrendPoint& p) {
    const auto it = std::find(order.begin(), order.end(), std::make_pair(p.when, p.run_id));
    return kLeft + (order.size() > 1 ? step * static_cast<double>(it - order.begin()) : kPlotW / 2.0);
  };
  auto py = [&](double v) { return kPlotTop + kPlotH - std::clamp(v / top, 0.0, 1.0) * kPlotH; };
  const int height = kPlotTop + kPlotH + 40;
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" class="chart trend" data-bench="{0}" width="{1}" height="{2}" )"
      R"(viewBox="0 0 {1} {2}" role="img" aria-label="items/s of {0} over its runs" font-family="sans-serif" )"
      R"(font-size="12"><text x="{3}" y="16" font-weight="bold">{0}: items/s per run</text>)",
      core::html_escape(bench), kWidth, height, kLeft);
  out += fmt::format(R"(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#999"/><line x1="{0}" y1="{2}" x2="{3}" )"
                     R"(y2="{2}" stroke="#999"/><text x="{4}" y="{5}" text-anchor="end">{6}</text>)"
                     R"(<text x="{4}" y="{2}" text-anchor="end">0</text>)",
                     kLeft, kPlotTop, kPlotTop + kPlotH, kLeft + kPlotW, kLeft - 4, kPlotTop + 4,
                     fmt::format("{:.4g}", top));
  std::size_t i = 0;
  for (const TrendSeries& s : series) {
    const char* color = kColors[i % std::size(kColors)];
    out += fmt::format(R"(<g class="trend-series" data-machine="{}">)", core::html_escape(s.label));
    out += fmt::format(R"(<rect x="{}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{}</text>)",
                       kLeft + 8 + 240 * static_cast<int>(i), kPlotTop + kPlotH + 14, color,
                       kLeft + 24 + 240 * static_cast<int>(i), kPlotTop + kPlotH + 24, core::html_escape(s.label));
    std::string points;
    for (const TrendPoint& p : s.points) {
      const double x = px(p);
      const std::string title = fmt::format(
          "{} {} ({}): {} items/s{}{}", core::html_escape(bench), core::html_escape(p.run_id),
          core::html_escape(p.when), std::isfinite(p.items_per_s) ? fmt::format("{:.4g}", p.items_per_s) : "no",
          p.failures ? fmt::format(", {} failed", p.failures) : "", p.change.empty() ? "" : ", " + p.change);
      if (!std::isfinite(p.items_per_s)) {
        const double y = kPlotTop + kPlotH;
        out += fmt::format(R"(<g class="failed-run"><path d="M{0:.2f},{1:.2f} l8,8 m0,-8 l-8,8" stroke="#c62828" )"
                           R"(stroke-width="2"/><title>{2}</title></g>)",
                           x - 4, y - 4, title);
        continue;
      }
      const double y = py(p.items_per_s);
      points += fmt::format("{:.2f},{:.2f} ", x, y);
      const char* fill = p.change == "regression" ? "#c62828" : p.change == "improvement" ? "#1a7f37" : color;
      out += fmt::format(R"(<circle class="run" cx="{:.2f}" cy="{:.2f}" r="4" fill="{}"><title>{}</title></circle>)", x,
                         y, fill, title);
      if (p.failures > 0) {
        out += fmt::format(R"(<g class="failed-run"><circle cx="{:.2f}" cy="{:.2f}" r="8" fill="none" )"
                           R"(stroke="#c62828" stroke-width="2"/><title>{}</title></g>)",
                           x, y, title);
      }
    }
    if (!points.empty()) {
      out += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}"/>)", points, color);
    }
    out += "</g>";
    ++i;
  }
  return out + "</svg>";
}

}  // namespace mlbench::report
