// Sizing a run by its noise (see run_sizing.h).
#include "run_sizing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

namespace mlbench::stall {

double t_quantile_975(int df) {
  // Student's t, two-sided 95%, df 1..30, then a few steps to the normal's 1.96.
  static constexpr std::array<double, 30> kSmall{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                                 2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                                 2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) df = 1;
  if (df <= 30) return kSmall[static_cast<std::size_t>(df - 1)];
  if (df <= 40) return 2.021;
  if (df <= 60) return 2.000;
  if (df <= 120) return 1.980;
  if (df <= 200) return 1.972;
  return 1.960;
}

std::optional<double> relative_half_width(double cv, int observations) {
  if (observations < 2 || !(cv >= 0) || !std::isfinite(cv)) return std::nullopt;
  return t_quantile_975(observations - 1) * cv / std::sqrt(static_cast<double>(observations));
}

RunPart pool(const std::vector<RunPart>& parts) {
  if (parts.empty()) throw std::invalid_argument("pool: no parts");
  if (parts.size() == 1) return parts.front();
  RunPart out;
  double n = 0, weighted = 0;
  for (const RunPart& p : parts) {
    const double k = std::max(1, p.observations);
    n += k;
    weighted += k * p.rate;
    out.wall_s += p.wall_s;
    out.timed_s += p.timed_s;
  }
  out.rate = weighted / n;
  out.observations = static_cast<int>(n);
  if (!(out.rate > 0) || n < 2) return out;
  // The observations' sd in each part is cv x rate (a population sd over its k observations).
  double ss = 0;
  for (const RunPart& p : parts) {
    const double k = std::max(1, p.observations);
    const double sd = p.cv * p.rate;
    ss += k * sd * sd + k * (p.rate - out.rate) * (p.rate - out.rate);
  }
  out.cv = std::sqrt(ss / n) / out.rate;
  return out;
}

double run_time_limit(const SizingRule& rule, double first_wall_s, double budget_left_s) {
  return rule.max_run_s > 0 ? rule.max_run_s : std::max(0.0, first_wall_s) + std::max(0.0, budget_left_s);
}

SizingStep next_step(const SizingRule& rule, const std::vector<RunPart>& parts, double budget_left_s) {
  SizingStep step;
  if (parts.empty()) throw std::invalid_argument("next_step: no parts");
  const RunPart all = pool(parts);
  step.half_width = relative_half_width(all.cv, all.observations);
  step.elapsed_s = all.wall_s;
  step.limit_s = run_time_limit(rule, parts.front().wall_s, budget_left_s);
  if (rule.target <= 0) {
    step.within = true;  // fixed sizing: nothing to reach
    return step;
  }
  if (!step.half_width || !(all.rate > 0)) return step;  // no noise to size by
  if (*step.half_width <= rule.target) {
    step.within = true;
    return step;
  }
  if (static_cast<int>(parts.size()) > rule.max_extensions) {
    step.limit_hit = true;
    step.parts_capped = true;
    return step;
  }
  const RunPart& first = parts.front();
  const double ratio = *step.half_width / rule.target;
  const double needed = static_cast<double>(all.observations) * ratio * ratio;
  double scale = (needed - all.observations) / std::max(1, first.observations);
  scale = std::clamp(scale, kMinScale, rule.max_scale);
  const bool timed_known = first.timed_s > 0 && first.timed_s <= first.wall_s;
  const double startup = timed_known ? first.wall_s - first.timed_s : first.wall_s;
  const double per_scale = timed_known ? first.timed_s : first.wall_s;
  if (per_scale > 0) scale = std::min(scale, (step.limit_s - step.elapsed_s - startup) / per_scale);
  if (!(scale >= kMinScale)) {
    step.limit_hit = true;
    return step;
  }
  step.done = false;
  step.scale = scale;
  return step;
}

DriftCheck check_drift(const std::map<std::string, std::vector<double>>& round_rates, double effect) {
  DriftCheck c;
  c.effect = effect;
  for (const auto& [label, rates] : round_rates) {
    if (rates.size() < 2) continue;
    std::vector<double> sorted = rates;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[(sorted.size() - 1) / 2];
    if (!(median > 0)) continue;
    const double spread = (sorted.back() - sorted.front()) / median;
    if (spread > c.spread) {
      c.spread = spread;
      c.label = label;
    }
  }
  c.add_round = c.spread > effect;
  return c;
}

bool another_round(int made, int floor, int most, const DriftCheck& drift) {
  if (made < floor) return true;
  if (made >= most) return false;
  return drift.add_round;
}

std::optional<double> split_effect(double G, double P, double F_obs, double target) {
  if (!(G > 0) || !(P > 0) || !(F_obs > 0)) return std::nullopt;
  const double t_cold = 1 / F_obs;
  const double prep = std::max(0.0, (1 / P - 1 / G) / t_cold);
  const double fetch = std::max(0.0, (t_cold - 1 / P) / t_cold);
  return std::max(std::min(prep, fetch), 2 * target);
}

}  // namespace mlbench::stall
