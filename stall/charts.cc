#include "charts.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/html.h"

namespace mlbench::stall {
namespace {
constexpr const char* kCompute = "#4c78a8";
constexpr const char* kPrep = "#f58518";
constexpr const char* kFetch = "#e45756";

}  // namespace

std::string split_svg(const std::string& bench, const Split& s) {
  const double w = 520, x0 = 10, bar_w = 500;
  std::string out = fmt::format(
      R"svg(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="110" viewBox="0 0 {} 110" font-family="sans-serif" font-size="12">)svg"
      "\n<title>{} epoch time split</title>\n<text x=\"{}\" y=\"16\" font-weight=\"bold\">{}: where epoch time "
      "goes</text>\n",
      w + 20, w + 20, core::html_escape(bench), x0, core::html_escape(bench));
  double x = x0;
  const struct {
    const char* name;
    double pct;
    const char* color;
  } parts[] = {{"compute", s.compute_pct, kCompute}, {"prep stall", s.prep_pct, kPrep}, {"fetch stall", s.fetch_pct, kFetch}};
  for (const auto& p : parts) {
    const double width = bar_w * p.pct / 100.0;
    out += fmt::format(R"svg(<rect class="seg" data-part="{}" x="{:.1f}" y="26" width="{:.1f}" height="32" fill="{}"><title>{} {:.1f}%</title></rect>)svg"
                       "\n",
                       p.name, x, width, p.color, p.name, p.pct);
    if (width > 40) {
      out += fmt::format(R"svg(<text x="{:.1f}" y="47" fill="white" text-anchor="middle">{:.0f}%</text>)svg" "\n",
                         x + width / 2, p.pct);
    }
    x += width;
  }
  double lx = x0;
  for (const auto& p : parts) {
    out += fmt::format(R"svg(<rect x="{:.1f}" y="72" width="12" height="12" fill="{}"/><text x="{:.1f}" y="82">{} {:.1f}%</text>)svg" "\n",
                       lx, p.color, lx + 16, p.name, p.pct);
    lx += 170;
  }
  out += "</svg>\n";
  return out;
}

std::string whatif_svg(const std::string& bench, const std::vector<CurvePoint>& curve, double P, double G,
                       const std::vector<MeasuredPoint>& measured) {
  const double W = 560, H = 320, left = 60, right = 130, top = 30, bottom = 40;
  const double pw = W - left - right, ph = H - top - bottom;
  double ymax = std::max(P, G);
  for (const auto& c : curve) ymax = std::max(ymax, std::min(c.fetch, 3 * std::max(P, G)));
  for (const auto& m : measured) ymax = std::max(ymax, m.speed);
  ymax *= 1.1;
  const auto X = [&](double x) { return left + pw * x; };
  const auto Y = [&](double y) { return top + ph * (1.0 - std::min(y, ymax) / ymax); };
  std::string out = fmt::format(
      R"svg(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" font-family="sans-serif" font-size="12">)svg"
      "\n<title>{} what-if: speed vs cache size</title>\n"
      R"svg(<text x="{}" y="18" font-weight="bold">{}: predicted speed vs cached fraction</text>)svg"
      "\n",
      W, H, W, H, core::html_escape(bench), left, core::html_escape(bench));
  out += fmt::format(R"svg(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="black"/><line x1="{0}" y1="{2}" x2="{3}" y2="{2}" stroke="black"/>)svg" "\n",
                     left, top, top + ph, left + pw);
  for (int i = 0; i <= 4; ++i) {
    const double v = ymax * i / 4;
    out += fmt::format(R"svg(<text x="{}" y="{:.1f}" text-anchor="end">{:.0f}</text>)svg" "\n", left - 4, Y(v) + 4, v);
    out += fmt::format(R"svg(<text x="{:.1f}" y="{}" text-anchor="middle">{}%</text>)svg" "\n", X(i / 4.0), top + ph + 16, i * 25);
  }
  out += fmt::format(R"svg(<text x="{}" y="{}" text-anchor="middle">dataset cached (%)</text>)svg" "\n", left + pw / 2, H - 6);
  out += fmt::format(R"svg(<text x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">samples/s</text>)svg" "\n",
                     top + ph / 2, top + ph / 2);
  const auto polyline = [&](auto value, const char* color, const char* dash, const char* name) {
    std::string pts;
    for (const auto& c : curve) pts += fmt::format("{:.1f},{:.1f} ", X(c.x), Y(value(c)));
    out += fmt::format(R"svg(<polyline class="curve" data-name="{}" points="{}" fill="none" stroke="{}" stroke-width="2" stroke-dasharray="{}"/>)svg" "\n",
                       name, pts, color, dash);
  };
  polyline([](const CurvePoint& c) { return c.fetch; }, kFetch, "6 3", "F(x)");
  polyline([P](const CurvePoint&) { return P; }, kPrep, "2 3", "P");
  polyline([G](const CurvePoint&) { return G; }, kCompute, "2 3", "G");
  polyline([](const CurvePoint& c) { return c.predicted; }, "black", "", "predicted");
  for (const auto& m : measured) {
    out += fmt::format(R"svg(<circle class="measured" cx="{:.1f}" cy="{:.1f}" r="4" fill="white" stroke="black"><title>measured {:.0f}% cached: {:.1f}/s</title></circle>)svg" "\n",
                       X(m.x), Y(m.speed), 100 * m.x, m.speed);
  }
  const struct {
    const char* name;
    const char* color;
  } legend[] = {{"fetch F(x)", kFetch}, {"prep P", kPrep}, {"ingestion G", kCompute}, {"predicted", "black"}};
  double ly = top + 10;
  for (const auto& l : legend) {
    out += fmt::format(R"svg(<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="{3}" stroke-width="2"/><text x="{4}" y="{5}">{6}</text>)svg" "\n",
                       left + pw + 10, ly, left + pw + 30, l.color, left + pw + 34, ly + 4, l.name);
    ly += 18;
  }
  out += fmt::format(R"svg(<circle cx="{}" cy="{}" r="4" fill="white" stroke="black"/><text x="{}" y="{}">measured</text>)svg" "\n",
                     left + pw + 20, ly, left + pw + 34, ly + 4);
  out += "</svg>\n";
  return out;
}

}  // namespace mlbench::stall
