// SVG charts of a stall analysis: the stacked compute / prep / fetch bar and
// the what-if curves. Self-contained SVG text (no scripts, no fonts to fetch).
#pragma once

#include <string>
#include <vector>

#include "analysis.h"

namespace mlbench::stall {

struct MeasuredPoint {
  double x;      // cache fraction
  double speed;  // samples/s
};

std::string split_svg(const std::string& bench, const Split& split);
std::string whatif_svg(const std::string& bench, const std::vector<CurvePoint>& curve, double P, double G,
                       const std::vector<MeasuredPoint>& measured);

}  // namespace mlbench::stall
