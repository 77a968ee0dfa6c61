// The instability causes, dropped passes and outliers of report/instability.h.
#include "report/instability.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/statistics.h"

namespace mlbench::report {
namespace {
std::string seconds(double s) {
  return s < 1.0 ? fmt::format("{:.3g} ms", s * 1000.0) : fmt::format("{:.3g} s", s);
}

// A fence in items/s, as the reporters print items/s: whole numbers from 1000 up.
std::string items(double x) {
  return std::abs(x) >= 1000.0 ? fmt::format("{:.0f}", x) : fmt::format("{:.4g}", x);
}

std::string where(const std::string& run, const Instance& i) {
  return fmt::format("{}/D{}", run, i.slot);
}

// The instance with the largest `value` (finite only); `found` false when none.
template <typename F>
bool largest(const BenchInput& input, F value, std::string& at, double& best) {
  bool found = false;
  for (const RunInstances& run : input.runs) {
    for (const Instance& i : run.instances) {
      if (i.failed) continue;
      const double v = value(i);
      if (!std::isfinite(v)) continue;
      if (!found || v > best) {
        best = v;
        at = where(run.run, i);
        found = true;
      }
    }
  }
  return found;
}
// The smallest and the largest positive `value` over the non-failed instances, and
// where each was measured; false when no instance has one.
template <typename F>
bool extremes(const BenchInput& input, F value, double& lo, std::string& lo_at, double& hi, std::string& hi_at) {
  lo_at.clear();
  hi_at.clear();
  for (const RunInstances& run : input.runs) {
    for (const Instance& i : run.instances) {
      if (i.failed) continue;
      const double p = value(i);
      if (!(p > 0.0)) continue;
      if (lo_at.empty() || p < lo) lo = p, lo_at = where(run.run, i);
      if (hi_at.empty() || p > hi) hi = p, hi_at = where(run.run, i);
    }
  }
  return !lo_at.empty();
}

// The non-failed instance named `at` (R<k>/D<slot>).
const Instance* instance_at(const BenchInput& input, const std::string& at) {
  for (const RunInstances& run : input.runs) {
    for (const Instance& i : run.instances) {
      if (!i.failed && where(run.run, i) == at) return &i;
    }
  }
  return nullptr;
}

// The interference block of the non-failed instance named `at` (R<k>/D<slot>).
const Interference* interference_at(const BenchInput& input, const std::string& at) {
  const Instance* i = instance_at(input, at);
  return i && i->interference ? &*i->interference : nullptr;
}

// Short observations: a timed observation under the benchmark's minimum.
bool short_observations(const BenchInput& input, Instability& r) {
  // Short observations: the benchmark's own verdict when recorded, else train.avg against
  // kMinObservationS (so reports older than `stability` still get this cause).
  std::string short_at;
  double short_s = kNaN;
  bool short_recorded = false;
  for (const RunInstances& run : input.runs) {
    for (const Instance& i : run.instances) {
      if (i.failed) continue;
      const double s = i.stability && std::isfinite(i.stability->median_s) ? i.stability->median_s : i.observation_s;
      const bool is_short = i.stability ? i.stability->short_observations : std::isfinite(s) && s < kMinObservationS;
      if (is_short && (short_at.empty() || (std::isfinite(s) && !(s >= short_s)))) {
        short_at = where(run.run, i);
        short_s = s;
        short_recorded = i.stability.has_value();
      }
    }
  }
  if (!short_at.empty()) {
    r.cause = "short observations";
    r.evidence = std::isfinite(short_s)
                     ? fmt::format(
                           "short observations: one timed observation lasts {} in {} ({}), under the {} "
                           "minimum",
                           seconds(short_s), short_at, short_recorded ? "stability.median_s" : "train.avg",
                           short_recorded ? "benchmark's" : seconds(kMinObservationS))
                     : fmt::format("short observations: flagged by the benchmark in {}", short_at);
    return true;
  }
  return false;

}

// Other processes on the slot's CPUs, or time stolen from them.
bool other_load(const BenchInput& input, Instability& r) {
  std::string at;
  double v = 0.0;
  if (largest(
          input, [](const Instance& i) { return i.interference ? i.interference->other_cpu_pct : kNaN; }, at, v) &&
      v > kOtherLoadPct) {
    r.cause = "other load";
    r.evidence = fmt::format("other load: {:.0f}% of the slot's CPU time went to other processes in {}", v, at);
    return true;
  }
  if (largest(
          input, [](const Instance& i) { return i.interference ? i.interference->steal_pct : kNaN; }, at, v) &&
      v > kStealPct) {
    r.cause = "other load";
    r.evidence = fmt::format("other load: {:.0f}% of the wall time was stolen from the slot's CPUs in {}", v, at);
    return true;
  }
  return false;
}

// The fixed CPU probe moved during a job, or between passes: the machine itself got slower or faster.
bool probe_drift(const BenchInput& input, Instability& r) {
  std::string at;
  double v = 0.0;
  if (largest(
          input, [](const Instance& i) { return i.interference ? std::abs(i.interference->probe_drift_pct) : kNaN; },
          at, v) &&
      v > kProbeDriftPct) {
    r.cause = "machine drift";
    r.evidence = fmt::format(
        "machine drift: the fixed CPU probe's time changed by {:+.0f}% from before the job to after it in {}",
        interference_at(input, at)->probe_drift_pct, at);
    return true;
  }
  // The probe before each job, across passes: the machine itself got slower or faster.
  std::string lo_at, hi_at;
  double lo = kNaN, hi = kNaN;
  auto probe_before = [](const Instance& i) { return i.interference ? i.interference->probe_before_s : kNaN; };
  if (extremes(input, probe_before, lo, lo_at, hi, hi_at) && (hi / lo - 1.0) * 100.0 > kProbeSpreadPct) {
    r.cause = "machine drift";
    r.evidence = fmt::format("machine drift: the fixed CPU probe before the job took {} in {} and {} in {} (+{:.0f}%)",
                             seconds(lo), lo_at, seconds(hi), hi_at, (hi / lo - 1.0) * 100.0);
    return true;
  }
  return false;
}

// The probe on all slot CPUs at once moved where the one-thread probe did not.
bool parallel_probe_drift(const BenchInput& input, Instability& r) {
  std::string at;
  double v = 0.0;
  std::string lo_at, hi_at;
  double lo = kNaN, hi = kNaN;
  // The probe on all slot CPUs at once: within a pass, then across passes. It moves
  // where the one-thread probe did not when the slot's CPUs compete with each other.
  if (largest(
          input,
          [](const Instance& i) {
            if (!i.interference || !(i.interference->parallel_probe_before_s > 0.0)) return kNaN;
            return 100.0 * std::abs(i.interference->parallel_probe_after_s / i.interference->parallel_probe_before_s - 1.0);
          },
          at, v) &&
      v > kProbeDriftPct) {
    const Interference& f = *interference_at(input, at);
    r.cause = "machine drift";
    r.evidence = fmt::format(
        "machine drift: the probe on all of the slot's CPUs at once changed by {:+.0f}% from before the job to "
        "after it in {}",
        100.0 * (f.parallel_probe_after_s / f.parallel_probe_before_s - 1.0), at);
    return true;
  }
  auto parallel_before = [](const Instance& i) {
    return i.interference ? i.interference->parallel_probe_before_s : kNaN;
  };
  if (extremes(input, parallel_before, lo, lo_at, hi, hi_at) && (hi / lo - 1.0) * 100.0 > kProbeSpreadPct) {
    r.cause = "machine drift";
    r.evidence = fmt::format(
        "machine drift: the probe on all of the slot's CPUs at once before the job took {} in {} and {} in {} "
        "(+{:.0f}%) while the one-thread probe stayed within {:.0f}%: the slot's CPUs compete with each other",
        seconds(lo), lo_at, seconds(hi), hi_at, (hi / lo - 1.0) * 100.0, kProbeSpreadPct);
    return true;
  }
  return false;
}

// The same work took more CPU time per item, and ran slower: the machine's speed changed.
bool work_drift(const BenchInput& input, Instability& r) {
  std::string lo_at, hi_at;
  double lo = kNaN, hi = kNaN;
  // The same work's CPU time per item across passes: a process that needed more CPU time
  // for the same items, and ran slower, ran on a slower machine (the host's speed drifts
  // while every probe, taken before and after the job, holds still).
  auto cpu_per_item = [](const Instance& i) { return i.cpu_per_item_us; };
  if (extremes(input, cpu_per_item, lo, lo_at, hi, hi_at) && (hi / lo - 1.0) * 100.0 > kCpuPerItemSpreadPct) {
    const Instance* more = instance_at(input, hi_at);
    const Instance* less = instance_at(input, lo_at);
    if (more && less && more->items_per_s < less->items_per_s) {
      r.cause = "machine drift";
      r.evidence = fmt::format(
          "machine drift: the same work took {:.4g} us of CPU time per item in {} and {:.4g} us in {} (+{:.0f}%), "
          "and ran {:.0f}% slower there: the machine's speed changed, not the work",
          hi, hi_at, lo, lo_at, (hi / lo - 1.0) * 100.0, (1.0 - more->items_per_s / less->items_per_s) * 100.0);
      return true;
    }
  }
  return false;
}

// Observations after the warm-up still trend.
bool warm_up(const BenchInput& input, Instability& r) {
  for (const RunInstances& run : input.runs) {
    for (const Instance& i : run.instances) {
      if (i.failed || !i.stability || !i.stability->warmup_trending) continue;
      r.cause = "warm-up";
      r.evidence = std::isfinite(i.stability->trend_pct)
                       ? fmt::format(
                             "warm-up: observations after the warm-up still trend in {} (second half {:+.0f}% "
                             "against the first)",
                             where(run.run, i), i.stability->trend_pct)
                       : fmt::format("warm-up: observations after the warm-up still trend in {}", where(run.run, i));
      return true;
    }
  }
  return false;
}

// None of the outside causes: where the spread lives (within passes or between them), or why
// the cause is not recorded.
void spread_cause(const BenchInput& input, double sd_pct, Instability& r) {
  int instances = 0, with_stability = 0, with_interference = 0;
  for (const RunInstances& run : input.runs) {
    for (const Instance& i : run.instances) {
      if (i.failed) continue;
      ++instances;
      if (i.stability) ++with_stability;
      if (i.interference) ++with_interference;
    }
  }
  if (instances > 0 && with_stability == instances && with_interference == instances) {
    // None of the outside causes: where the spread lives. Observations that spread
    // within a pass move its mean by about sd / sqrt(n); passes that differ by more
    // than kBetweenPassFactor times that were each steady but started different.
    double sum_var = 0.0, widest = kNaN;
    int counted = 0;
    std::string widest_at;
    for (const RunInstances& run : input.runs) {
      for (const Instance& i : run.instances) {
        if (i.failed || !i.stability || !std::isfinite(i.stability->sd_pct) || i.stability->observations < 2) continue;
        sum_var += i.stability->sd_pct * i.stability->sd_pct / i.stability->observations;
        ++counted;
        if (widest_at.empty() || i.stability->sd_pct > widest) widest = i.stability->sd_pct, widest_at = where(run.run, i);
      }
    }
    if (counted > 0) {
      const double expected = std::sqrt(sum_var / counted);
      if (sd_pct > kBetweenPassFactor * expected) {
        r.cause = "between passes";
        r.evidence = fmt::format(
            "between passes: each pass was steady (observations spread at most {:.1f}% sd, in {}: a pass mean to "
            "about {:.1f}%), but the passes differ by {:.1f}% sd: something set when a pass starts (thread "
            "placement, memory layout, clock speed); more passes narrow it, longer ones do not",
            widest, widest_at, expected, sd_pct);
      } else {
        r.cause = "within-run noise";
        r.evidence = fmt::format(
            "within-run noise: observations spread up to {:.1f}% sd within a pass (in {}), which moves a pass "
            "mean by about {:.1f}%, as much as the passes differ ({:.1f}%); more or longer observations per pass "
            "(--repeat, --min-time) narrow it",
            widest, widest_at, expected, sd_pct);
      }
      return;
    }
    r.cause = "unexplained";
    r.evidence = fmt::format(
        "unexplained: observations long enough, other load <= {:.0f}%, probe drift <= {:.0f}%, no warm-up trend",
        kOtherLoadPct, kProbeDriftPct);
  } else {
    r.cause = "not recorded";
    r.evidence = with_stability < instances
                     ? "cause not recorded (reports written before the `stability` field; observations are long enough)"
                     : "cause not recorded (no `interference`: not run under mlbench-run; observations long enough, "
                       "no warm-up trend)";
  }
}

}  // namespace

Instability explain_instability(const BenchInput& input, double sd_pct, double limit_pct) {
  Instability r;
  r.sd_pct = sd_pct;
  r.limit_pct = limit_pct;
  if (short_observations(input, r) || other_load(input, r) || probe_drift(input, r) ||
      parallel_probe_drift(input, r) || work_drift(input, r) || warm_up(input, r)) {
    return r;
  }
  spread_cause(input, sd_pct, r);
  return r;
}

std::vector<NamedValue> dropped_passes(const std::vector<RunValue>& runs) {
  const RunValue* lo = nullptr;
  const RunValue* hi = nullptr;
  int n = 0;
  for (const RunValue& r : runs) {
    if (!std::isfinite(r.items_per_s)) continue;
    ++n;
    if (!lo || r.items_per_s < lo->items_per_s) lo = &r;
    if (!hi || r.items_per_s > hi->items_per_s) hi = &r;
  }
  if (n < 3) return {};
  if (lo == hi)
    hi = &*std::find_if(runs.rbegin(), runs.rend(), [](const RunValue& r) {
      return std::isfinite(r.items_per_s);
    });  // all equal: core::trimmed_mean still drops two values
  return {{lo->run, lo->items_per_s, "lowest pass, dropped by the trimmed mean"},
          {hi->run, hi->items_per_s, "highest pass, dropped by the trimmed mean"}};
}

std::vector<NamedValue> tukey_outliers(const std::vector<NamedValue>& values) {
  std::vector<double> xs;
  for (const NamedValue& v : values) {
    if (std::isfinite(v.items_per_s)) xs.push_back(v.items_per_s);
  }
  if (static_cast<int>(xs.size()) < kMinValuesForOutliers) return {};
  const double q1 = core::quantile(xs, 0.25), q3 = core::quantile(xs, 0.75);
  const double low = q1 - kTukeyK * (q3 - q1), high = q3 + kTukeyK * (q3 - q1);
  std::vector<NamedValue> out;
  for (const NamedValue& v : values) {
    if (!std::isfinite(v.items_per_s)) continue;
    if (v.items_per_s < low)
      out.push_back({v.where, v.items_per_s, fmt::format("below Q1 - 1.5 IQR ({})", items(low))});
    if (v.items_per_s > high)
      out.push_back({v.where, v.items_per_s, fmt::format("above Q3 + 1.5 IQR ({})", items(high))});
  }
  return out;
}

std::vector<NamedValue> find_outliers(const BenchInput& input, const std::vector<RunValue>& runs) {
  std::vector<NamedValue> instances;
  bool several = false;
  for (const RunInstances& run : input.runs) {
    int kept = 0;
    for (const Instance& i : run.instances) {
      if (i.failed || !std::isfinite(i.items_per_s)) continue;
      instances.push_back({where(run.run, i), i.items_per_s, ""});
      ++kept;
    }
    several = several || kept > 1;
  }
  std::vector<NamedValue> out = tukey_outliers(instances);
  if (several) {
    std::vector<NamedValue> passes;
    for (const RunValue& r : runs) passes.push_back({r.run, r.items_per_s, ""});
    for (NamedValue& v : tukey_outliers(passes)) out.push_back(std::move(v));
  }
  return out;
}

}  // namespace mlbench::report
