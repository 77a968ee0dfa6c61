#include "report/report_statistics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/statistics.h"
#include "report/instability.h"
#include "report/significance.h"

namespace mlbench::report {

std::vector<double> finite_values(std::span<const double> xs) {
  std::vector<double> out;
  for (double x : xs) {
    if (std::isfinite(x)) out.push_back(x);
  }
  return out;
}

double run_value(const RunInstances& run) {
  std::vector<double> values;
  for (const Instance& i : run.instances) {
    if (!i.failed && std::isfinite(i.items_per_s)) values.push_back(i.items_per_s);
  }
  return values.empty() ? kNaN : core::mean(values);
}

double trimmed_result(std::span<const double> run_values) {
  const std::vector<double> v = finite_values(run_values);
  if (v.empty()) return kNaN;
  if (v.size() < 3) return core::mean(v);
  return core::trimmed_mean(v);
}

double run_sd(std::span<const double> run_values) {
  const std::vector<double> v = finite_values(run_values);
  return v.size() < 2 ? kNaN : core::sd_sample(v);
}

double sd_fraction(double sd, double result) {
  if (!std::isfinite(sd) || !std::isfinite(result) || result == 0.0) return kNaN;
  return sd / result;
}

double target_diff(double result, double target) {
  if (!std::isfinite(result) || !std::isfinite(target) || target <= 0.0) return kNaN;
  return result / target - 1.0;
}

double deviation_quantile_pct(std::span<const double> sd_fracs) {
  std::vector<double> pct = finite_values(sd_fracs);
  if (pct.empty()) return kNaN;
  for (double& x : pct) x *= 100.0;
  return core::quantile(pct, kDeviationQuantile);
}

double performance_pct(std::span<const double> diffs) {
  const std::vector<double> v = finite_values(diffs);
  return v.empty() ? kNaN : core::mean(v) * 100.0;
}

bool deviation_passes(double quantile_pct) {
  return std::isfinite(quantile_pct) && quantile_pct < kDeviationLimitPct;
}
bool performance_passes(double performance) {
  return std::isfinite(performance) && performance >= 0.0;
}

BenchResult summarize_bench(const BenchInput& input, const std::optional<Target>& target, int min_runs) {
  BenchResult r;
  r.name = input.name;
  r.target = target;
  r.expected = target.has_value();
  std::vector<double> values, stalls, allreduce, gpu_util;
  double wait = 0.0, h2d = 0.0, compute = 0.0;
  int phase_count = 0;
  for (const RunInstances& run : input.runs) {
    RunValue rv;
    rv.run = run.run;
    rv.items_per_s = run_value(run);
    rv.instances = static_cast<int>(run.instances.size());
    for (const Instance& i : run.instances) {
      if (i.failed) {
        ++rv.failures;
        r.failure_reasons.push_back(fmt::format("{}/D{}: {}", run.run, i.slot, i.reason));
        continue;
      }
      if (std::isfinite(i.stall_pct)) stalls.push_back(i.stall_pct);
      if (std::isfinite(i.allreduce_pct)) allreduce.push_back(i.allreduce_pct);
      if (std::isfinite(i.gpu_util_pct)) gpu_util.push_back(i.gpu_util_pct);
      if (std::isfinite(i.wait_s) && std::isfinite(i.compute_s)) {
        wait += i.wait_s;
        h2d += std::isfinite(i.h2d_s) ? i.h2d_s : 0.0;
        compute += i.compute_s;
        ++phase_count;
      }
    }
    r.instances += rv.instances;
    r.failures += rv.failures;
    if (std::isfinite(rv.items_per_s)) values.push_back(rv.items_per_s);
    r.runs.push_back(rv);
  }
  r.n = static_cast<int>(values.size());
  r.enough_runs = r.n >= min_runs;
  r.result = trimmed_result(values);
  r.sd = run_sd(values);
  r.sd_frac = sd_fraction(r.sd, r.result);
  if (target) r.diff = target_diff(r.result, target->items_per_s);
  if (!values.empty()) {
    r.min_run = *std::min_element(values.begin(), values.end());
    r.max_run = *std::max_element(values.begin(), values.end());
  }
  const double limit_pct = target ? target->sd_target : kDeviationLimitPct;
  if (std::isfinite(r.sd_frac) && r.sd_frac * 100.0 > limit_pct) {
    r.instability = explain_instability(input, r.sd_frac * 100.0, limit_pct);
  }
  r.dropped = dropped_passes(r.runs);
  r.outliers = find_outliers(input, r.runs);
  if (!stalls.empty()) r.stall_pct = core::mean(stalls);
  if (!allreduce.empty()) r.allreduce_pct = core::mean(allreduce);
  if (!gpu_util.empty()) r.gpu_util_pct = core::mean(gpu_util);
  const double total = wait + h2d + compute;
  if (phase_count > 0 && total > 0.0) {
    r.wait_frac = wait / total;
    r.h2d_frac = h2d / total;
    r.compute_frac = compute / total;
  }
  return r;
}

SuiteStatistics summarize_suite(const std::vector<BenchResult>& benches, const std::vector<std::string>& expected) {
  SuiteStatistics s;
  std::map<std::string, const BenchResult*> by_name;
  for (const BenchResult& b : benches) by_name[b.name] = &b;
  for (const std::string& name : expected) {
    auto it = by_name.find(name);
    if (it == by_name.end() || !it->second->enough_runs) s.missing.push_back(name);
  }
  std::vector<double> sd_fracs, diffs, ratios;
  int perf_ok = 0, stable = 0, with_target = 0;
  for (const BenchResult& b : benches) {
    // A bench not in the targets still has to have enough runs when it is all there is.
    if (expected.empty() && !b.enough_runs) s.missing.push_back(b.name);
    if (b.failures > 0) s.failed.push_back(b.name);
    s.total_instances += b.instances;
    s.failed_instances += b.failures;
    sd_fracs.push_back(b.sd_frac);
    diffs.push_back(b.diff);
    if (b.target && std::isfinite(b.result) && b.result > 0.0 && std::isfinite(b.target->items_per_s)) {
      const double ratio = b.result / b.target->items_per_s;
      ratios.push_back(ratio);
      ++with_target;
      if (ratio >= b.target->perf_target) ++perf_ok;
      if (std::isfinite(b.sd_frac) && b.sd_frac * 100.0 <= b.target->sd_target) ++stable;
    }
  }
  s.bench_passes = !benches.empty() && s.missing.empty() && s.failed.empty();
  s.deviation_q80_pct = deviation_quantile_pct(sd_fracs);
  s.deviation_passes = deviation_passes(s.deviation_q80_pct);
  s.performance_pct = performance_pct(diffs);
  s.performance_passes = performance_passes(s.performance_pct);
  s.ratio_benches = static_cast<int>(ratios.size());
  if (!ratios.empty()) s.geomean_ratio = core::geometric_mean(ratios);
  if (s.total_instances > 0) {
    s.failure_rate = static_cast<double>(s.failed_instances) / static_cast<double>(s.total_instances);
  }
  if (with_target > 0) {
    s.meets_perf_share = static_cast<double>(perf_ok) / with_target;
    s.stable_share = static_cast<double>(stable) / with_target;
    if (std::isfinite(s.failure_rate) && std::isfinite(s.geomean_ratio)) {
      const double bf = s.failure_rate <= kMaxFailureRate ? 1.0 : 0.0;
      s.milabench_score = bf * (2.0 * s.meets_perf_share + s.stable_share + 5.0 * s.geomean_ratio);
    }
  }
  return s;
}

namespace {
std::vector<double> run_values_of(const BenchResult& b) {
  std::vector<double> v;
  for (const RunValue& r : b.runs) {
    if (std::isfinite(r.items_per_s)) v.push_back(r.items_per_s);
  }
  return v;
}
}  // namespace

void test_significance(CompareRow& r, std::span<const double> a_runs, std::span<const double> b_runs) {
  const MannWhitney t = mann_whitney_u(a_runs, b_runs);
  r.a_n = t.n_a;
  r.b_n = t.n_b;
  r.min_p = t.min_p;
  if (t.method == UMethod::None) {
    r.verdict = "not compared";
    r.note = "no pass on one side";
    return;
  }
  r.u = t.u_a;
  r.p_value = t.p_value;
  r.method = method_name(t.method);
  r.significant = t.p_value < kSignificanceAlpha;
  // Higher items/s is faster; U above its null mean says this side's passes tend higher.
  if (r.significant) {
    r.verdict = t.u_a > t.n_a * t.n_b / 2.0 ? "faster" : "slower";
  } else {
    r.verdict = "no significant difference";
    if (t.min_p >= kSignificanceAlpha) {
      r.note = fmt::format("needs >= {} passes a side: with {} vs {} no p is below {:.3g}",
                           passes_needed_per_side(kSignificanceAlpha), t.n_a, t.n_b, t.min_p);
    }
  }
}

std::vector<CompareRow> compare_results(const std::vector<BenchResult>& a, const std::vector<BenchResult>& b) {
  std::map<std::string, CompareRow> rows;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> passes;
  for (const BenchResult& x : a) {
    CompareRow& r = rows[x.name];
    r.name = x.name;
    r.a_result = x.result;
    r.a_sd = x.sd;
    passes[x.name].first = run_values_of(x);
  }
  for (const BenchResult& x : b) {
    CompareRow& r = rows[x.name];
    r.name = x.name;
    r.b_result = x.result;
    r.b_sd = x.sd;
    passes[x.name].second = run_values_of(x);
  }
  std::vector<CompareRow> out;
  for (auto& [name, r] : rows) {
    test_significance(r, passes[name].first, passes[name].second);
    if (std::isfinite(r.a_result) && std::isfinite(r.b_result) && r.b_result > 0.0) {
      r.ratio = r.a_result / r.b_result;
      r.change_pct = (r.ratio - 1.0) * 100.0;
      const double sa = std::isfinite(r.a_sd) ? r.a_sd : 0.0;
      const double sb = std::isfinite(r.b_sd) ? r.b_sd : 0.0;
      r.combined_sd = std::sqrt(sa * sa + sb * sb);
      r.beyond_combined_sd = std::abs(r.a_result - r.b_result) > r.combined_sd;
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace mlbench::report
