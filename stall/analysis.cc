#include "analysis.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace mlbench::stall {
namespace {
void require_positive(double v, const char* name) {
  if (!(v > 0) || !std::isfinite(v)) {
    throw std::invalid_argument(fmt::format("rate {} must be positive and finite, got {}", name, v));
  }
}
}  // namespace

Split split(double G, double P, double F_obs) {
  require_positive(G, "G");
  require_positive(P, "P");
  require_positive(F_obs, "F_obs");
  const double tg = 1.0 / G, tp = 1.0 / P, tc = 1.0 / F_obs;
  Split s;
  s.raw_compute_pct = 100.0 * tg / tc;
  s.raw_prep_pct = 100.0 * (tp - tg) / tc;
  s.raw_fetch_pct = 100.0 * (tc - tp) / tc;
  const double c = std::max(0.0, s.raw_compute_pct);
  const double p = std::max(0.0, s.raw_prep_pct);
  const double f = std::max(0.0, s.raw_fetch_pct);
  const double sum = c + p + f;
  s.compute_pct = 100.0 * c / sum;
  s.prep_pct = 100.0 * p / sum;
  s.fetch_pct = 100.0 * f / sum;
  return s;
}

double fetch_rate(double x, double C, double S) {
  require_positive(C, "C");
  require_positive(S, "S");
  if (!(x >= 0.0 && x <= 1.0)) throw std::invalid_argument(fmt::format("cache fraction must be in [0, 1], got {}", x));
  return 1.0 / (x / C + (1.0 - x) / S);
}

double exposed_fetch_s(double G, double P, double S, double F_obs, double min_share) {
  require_positive(G, "G");
  require_positive(P, "P");
  require_positive(S, "S");
  require_positive(F_obs, "F_obs");
  const double e = 1.0 / F_obs - std::max({1.0 / G, 1.0 / P, 1.0 / S});
  return e * F_obs < min_share ? 0.0 : e;
}

const char* to_string(CacheKind k) {
  return k == CacheKind::Item ? "item cache" : "page cache";
}

double prep_rate(double x, double P, CacheKind cache, const ReadCpu& cpu) {
  if (!cpu.active()) return P;
  const double extra = (1.0 - x) * cpu.storage_extra_s - (cache == CacheKind::Item ? x * cpu.page_read_s : 0.0);
  // A hit never makes prep cost less than nothing: at most half of prep's time is taken off.
  return 1.0 / std::max(0.5 / P, 1.0 / P + extra / cpu.cpus);
}

double predicted_speed(double x, double P, double G, double C, double S, double exposed_s, CacheKind cache,
                       const ReadCpu& cpu) {
  const double Px = prep_rate(x, P, cache, cpu);
  if (exposed_s <= 0) return std::min({fetch_rate(x, C, S), Px, G});
  const double t = std::max({1.0 / fetch_rate(x, C, S), 1.0 / Px, 1.0 / G}) + (1.0 - x) * exposed_s;
  return 1.0 / t;
}

std::optional<double> recommended_cache(double P, double G, double C, double S, double exposed_s, CacheKind cache,
                                        const ReadCpu& cpu) {
  require_positive(P, "P");
  require_positive(G, "G");
  require_positive(C, "C");
  require_positive(S, "S");
  // The smallest x in [0, 1] where `enough` holds, by bisection; it holds for every larger x.
  const auto smallest = [](auto enough) -> std::optional<double> {
    if (enough(0.0)) return 0.0;
    if (!enough(1.0)) return std::nullopt;
    double lo = 0.0, hi = 1.0;
    for (int i = 0; i < 60; ++i) {
      const double mid = 0.5 * (lo + hi);
      (enough(mid) ? hi : lo) = mid;
    }
    return hi;
  };
  if (exposed_s > 0) {
    const double target = 0.98 * std::min(prep_rate(1.0, P, cache, cpu), G);
    return smallest([&](double x) { return predicted_speed(x, P, G, C, S, exposed_s, cache, cpu) >= target; });
  }
  if (cpu.active()) {
    // Prep's rate moves with x (fewer storage reads, or fewer reads at all): the
    // smallest x from which fetch is no longer the limit.
    return smallest([&](double x) { return fetch_rate(x, C, S) >= std::min(prep_rate(x, P, cache, cpu), G); });
  }
  const double need = std::min(P, G);
  if (S >= need) return 0.0;
  if (C < need) return std::nullopt;
  // x / C + (1 - x) / S <= 1 / need  <=>  x >= (1/S - 1/need) / (1/S - 1/C)
  const double x = (1.0 / S - 1.0 / need) / (1.0 / S - 1.0 / C);
  return std::clamp(x, 0.0, 1.0);
}

double cache_for_share(const std::function<double(double)>& speed, double share) {
  const double target = share * speed(1.0);
  if (speed(0.0) >= target) return 0.0;
  double lo = 0.0, hi = 1.0;
  for (int i = 1; i <= 20; ++i) {
    const double x = i / 20.0;
    if (speed(x) >= target) {
      hi = x;
      break;
    }
    lo = x;
  }
  for (int i = 0; i < 20; ++i) {
    const double mid = 0.5 * (lo + hi);
    (speed(mid) >= target ? hi : lo) = mid;
  }
  return hi;
}

double rounds_uncertainty(const std::vector<double>& rates) {
  if (rates.size() < 2) return 0.0;
  double mean = 0;
  for (double r : rates) mean += r;
  mean /= static_cast<double>(rates.size());
  if (!(mean > 0)) return 0.0;
  double ss = 0;
  for (double r : rates) ss += (r - mean) * (r - mean);
  const double sd = std::sqrt(ss / static_cast<double>(rates.size() - 1));
  return sd / mean / std::sqrt(static_cast<double>(rates.size()));
}

std::optional<int> recommended_cores(const std::map<int, double>& P_by_cores, double need) {
  for (const auto& [cores, rate] : P_by_cores) {
    if (rate >= need) return cores;
  }
  return std::nullopt;
}

double prep_rate_at(const std::map<int, double>& P_by_cores, double cores) {
  if (P_by_cores.empty()) throw std::invalid_argument("no prep rates measured");
  auto hi = P_by_cores.lower_bound(static_cast<int>(std::ceil(cores)));
  if (hi == P_by_cores.begin()) return hi->second;
  if (hi == P_by_cores.end()) return std::prev(hi)->second;
  if (hi->first == cores) return hi->second;
  auto lo = std::prev(hi);
  const double t = (cores - lo->first) / (hi->first - lo->first);
  return lo->second + t * (hi->second - lo->second);
}

const char* to_string(Bound b) {
  switch (b) {
    case Bound::Compute:
      return "compute-bound";
    case Bound::Prep:
      return "prep-bound";
    case Bound::Fetch:
      return "fetch-bound";
  }
  return "?";
}

Bound bound_of(const Split& s) {
  // The accelerator is the limit only while it computes at least as long as it waits: where the
  // two stalls together outweigh compute (even where compute is the largest single share), the data
  // holds it back more than its own speed does, and the larger stall names the bound (docs/stall.md,
  // "Analysis", the verdict).
  if (s.compute_pct >= s.prep_pct + s.fetch_pct) return Bound::Compute;
  return s.fetch_pct >= s.prep_pct ? Bound::Fetch : Bound::Prep;
}

std::string stall_verdict_text(Bound b, std::optional<double> cache_rec, std::optional<int> cores_rec, int cores_now,
                               const std::string& cpus_words) {
  std::string dram, cpus;
  if (cache_rec && *cache_rec > 0.0) {
    dram = fmt::format("more DRAM helps up to {:.0f}% cached", 100.0 * *cache_rec);
  } else if (cache_rec) {
    dram = "more DRAM does not help (storage keeps up)";
  } else {
    dram = "even a fully cached dataset cannot keep up (memory reads are too slow)";
  }
  if (cores_rec && *cores_rec > cores_now) {
    cpus = fmt::format("{} CPUs instead of {} remove the prep stall", *cores_rec, cores_now);
  } else if (cores_rec) {
    cpus = "more CPUs do not help";
  } else {
    cpus = "more CPUs help beyond the largest count measured";
  }
  if (!cpus_words.empty()) cpus = cpus_words;
  if (b == Bound::Fetch) return fmt::format("fetch-bound: {}, {}", dram, cpus);
  return fmt::format("prep-bound: {}; {}", cpus, cache_rec && *cache_rec > 0.0 ? dram : "more DRAM does not help");
}

Verdict verdict(const Split& s, std::optional<double> cache_rec, std::optional<int> cores_rec, int cores_now) {
  const Bound b = bound_of(s);
  if (b != Bound::Compute) return Verdict{b, stall_verdict_text(b, cache_rec, cores_rec, cores_now)};
  return Verdict{b, fmt::format("compute-bound: the accelerator is the limit ({:.0f}% of the time computing); "
                                "neither DRAM nor CPUs help",
                                s.compute_pct)};
}

std::vector<Remedy> rank_remedies(std::vector<Remedy> candidates) {
  std::erase_if(candidates, [](const Remedy& r) {
    return !(std::isfinite(r.from) && std::isfinite(r.to) && r.from > 0 && r.to > 0);
  });
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Remedy& a, const Remedy& b) { return a.gain() > b.gain(); });
  return candidates;
}

std::optional<Remedy> best_remedy(const std::vector<Remedy>& ranked) {
  if (ranked.empty() || ranked.front().low() < kMinRemedyGain) return std::nullopt;
  return ranked.front();
}

std::string gain_text(const Remedy& r) {
  const bool ranged = r.gain_lo > 0 && r.gain_hi > 0 && (r.low() < r.gain() - 0.005 || r.high() > r.gain() + 0.005);
  return ranged ? fmt::format("x{:.2f} [{:.2f}-{:.2f}]", r.gain(), r.low(), r.high())
                : fmt::format("x{:.2f}", r.gain());
}

std::string remedy_text(const std::vector<Remedy>& ranked) {
  if (const auto best = best_remedy(ranked)) {
    return fmt::format("{} helps most: {} ({}: {:.1f} -> {:.1f} samples/s)", best->name, gain_text(*best), best->detail,
                       best->from, best->to);
  }
  if (ranked.empty()) return "no remedy predicted";
  std::string names;
  for (const Remedy& r : ranked) names += (names.empty() ? "" : ", ") + fmt::format("{} x{:.2f}", r.name, r.gain());
  return fmt::format("no remedy predicts a gain of {:.0f}% or more ({})", 100 * (kMinRemedyGain - 1), names);
}

std::string disagreement_note(double direct_pct, double differential_pct, double noise_pp) {
  const double margin = std::max(5.0, 2.0 * noise_pp);
  if (direct_pct < differential_pct - margin) {
    return fmt::format(
        "the loop waited for data {:.1f}% of the time, less than the {:.1f}% stall of the split: prep "
        "slowed compute without making it wait (prep and compute share the CPUs, as without an "
        "accelerator), so part of the stall share is CPU contention",
        direct_pct, differential_pct);
  }
  if (direct_pct > differential_pct + margin) {
    return fmt::format(
        "the loop waited for data {:.1f}% of the time, more than the {:.1f}% stall of the split: batches "
        "arrive in bursts that the average rates hide (a deeper --prefetch may help)",
        direct_pct, differential_pct);
  }
  return "";
}

std::vector<std::string> consistency_warnings(double P, double F_obs, double cache_full, double tolerance) {
  std::vector<std::string> out;
  if (F_obs > P * (1 + tolerance)) {
    out.push_back(
        fmt::format("the cold run ({:.1f}/s) was {:.0f}% faster than the cached run ({:.1f}/s): the machine's "
                    "speed changed between runs; rerun, with more --rounds or --iterations",
                    F_obs, 100 * (F_obs / P - 1), P));
  }
  if (std::isfinite(cache_full) && std::abs(cache_full - P) > tolerance * std::max(P, cache_full)) {
    out.push_back(
        fmt::format("the cached run ({:.1f}/s) and the run with the whole dataset in the cache ({:.1f}/s) "
                    "measure the same rate but differ by {:.0f}%: the machine's speed changed between runs; "
                    "rerun, with more --rounds or --iterations",
                    P, cache_full, 100 * std::abs(cache_full - P) / std::max(P, cache_full)));
  }
  return out;
}

std::vector<CurvePoint> whatif_curve(const std::vector<double>& xs, double P, double G, double C, double S,
                                     double exposed_s) {
  std::vector<CurvePoint> out;
  out.reserve(xs.size());
  for (double x : xs) out.push_back({x, fetch_rate(x, C, S), predicted_speed(x, P, G, C, S, exposed_s)});
  return out;
}

double relative_error(double predicted, double measured) {
  return std::abs(predicted - measured) / measured;
}

}  // namespace mlbench::stall

namespace mlbench::stall {

SplitNoise split_noise(double G, double P, double F_obs, double cv_G, double cv_P, double cv_F) {
  const Split base = split(G, P, F_obs);
  SplitNoise n;
  for (int mask = 0; mask < 8; ++mask) {
    const double g = G * (1 + ((mask & 1) ? cv_G : -cv_G));
    const double p = P * (1 + ((mask & 2) ? cv_P : -cv_P));
    const double f = F_obs * (1 + ((mask & 4) ? cv_F : -cv_F));
    if (g <= 0 || p <= 0 || f <= 0) continue;
    const Split s = split(g, p, f);
    n.compute_pp = std::max(n.compute_pp, std::abs(s.compute_pct - base.compute_pct));
    n.prep_pp = std::max(n.prep_pp, std::abs(s.prep_pct - base.prep_pct));
    n.fetch_pp = std::max(n.fetch_pp, std::abs(s.fetch_pct - base.fetch_pct));
  }
  return n;
}

}  // namespace mlbench::stall

namespace mlbench::stall {
namespace {

enum class Cause { CachedFraction, PageCache, Serial, ExposedReads, SparseMisses, Unknown };

std::string pct_list(const std::vector<CheckPoint>& points) {
  std::string out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    out += fmt::format("{}{:.0f}%", i == 0 ? "" : (i + 1 == points.size() ? " and " : ", "), 100 * points[i].x);
  }
  return out;
}

Cause cause_of(const CheckPoint& p, double need, bool serial_model, bool reads_ahead) {
  if (p.cached_fraction >= 0 && std::abs(p.cached_fraction - p.x) > kCachedFractionTolerance)
    return Cause::CachedFraction;
  if (p.page_cache_fraction > kPageCacheTolerance) return Cause::PageCache;
  const double ratio = std::max(p.fetch, need) / std::min(p.fetch, need);
  if (!serial_model && p.measured < p.predicted && ratio <= kComparableRates) {
    return reads_ahead ? Cause::ExposedReads : Cause::Serial;
  }
  if (serial_model && p.measured > p.predicted) return Cause::SparseMisses;
  return Cause::Unknown;
}

std::string cause_text(Cause c, const std::vector<CheckPoint>& points, double need, bool serial_model) {
  std::string values;
  switch (c) {
    case Cause::CachedFraction:
      for (const auto& p : points) {
        values += fmt::format("{}{:.0f}% of the dataset in the run at {:.0f}%", values.empty() ? "" : ", ",
                              100 * p.cached_fraction, 100 * p.x);
      }
      return fmt::format(
          "the item cache held {}, not the fraction the what-if assumes: those runs did not measure "
          "the cache the model is about",
          values);
    case Cause::PageCache:
      for (const auto& p : points) {
        values += fmt::format("{}{:.0f}% after the run at {:.0f}%", values.empty() ? "" : ", ",
                              100 * p.page_cache_fraction, 100 * p.x);
      }
      return fmt::format(
          "the OS page cache held part of the dataset ({}): misses were partly read from memory, not "
          "storage, while the model sends every miss to storage at S and every hit to the item cache",
          values);
    case Cause::Serial:
    case Cause::ExposedReads: {
      for (const auto& p : points) {
        values += fmt::format("{}F({:.2f}) = {:.0f}/s", values.empty() ? "" : ", ", p.x, p.fetch);
      }
      const char* why =
          c == Cause::Serial
              ? "fetch and prep overlapped, but workers that fetch and then prep each sample in turn add the two "
                "times (serial workers), so the overlap model does not hold for this loader here"
              : "reads and prep overlapped completely; the loader reads ahead, but a device that serves reads in "
                "bursts (a throttle releases them per timer tick; a shared disk) still leaves workers waiting for "
                "reads (the run's stages.fetch), so the overlap model is optimistic where the two rates are this "
                "close (a read's own CPU is charged to prep where the runs recorded it: whatif.read_cpu)";
      return fmt::format(
          "fetch and prep are comparable ({} against min(P, G) = {:.0f}/s, within a factor of {:.0f}) "
          "and the speed is below the prediction: the model takes the smaller rate as if {}",
          values, need, kComparableRates, why);
    }
    case Cause::SparseMisses:
      return fmt::format(
          "faster than the serial model at {}: it queues every miss on one storage device at S, but "
          "storage that serves sparse requests faster than its average rate (a throttle with a "
          "burst allowance, such as cgroup blkio, or a device with parallel queues) lets a worker's "
          "miss cost less than 1/S when the cache thins the misses out",
          pct_list(points));
    case Cause::Unknown:
      break;
  }
  return fmt::format(
      "none the analyzer can tell at {} (the item cache and the page cache held what they should, "
      "intended, and {}): the machine's speed may have changed between runs; rerun, with more "
      "--rounds or --iterations",
      pct_list(points),
      serial_model ? "the serial model already simulates workers that fetch and then prep"
                   : "fetch and prep are not comparable");
}

}  // namespace

double CheckPoint::error_pct() const {
  return 100 * relative_error(predicted, measured);
}

bool CheckPoint::off(double threshold_pct) const {
  const bool ranged = hi > 0 && lo <= predicted && predicted <= hi;
  return error_pct() > threshold_pct && !(ranged && lo <= measured && measured <= hi);
}

SelfCheck self_check(const std::vector<CheckPoint>& points, double P, double G, double threshold_pct, bool serial_model,
                     bool reads_ahead) {
  SelfCheck c;
  c.threshold_pct = threshold_pct;
  for (const CheckPoint& p : points) {
    if (p.x > 0 && p.x < 1) c.points.push_back(p);
  }
  std::sort(c.points.begin(), c.points.end(), [](const CheckPoint& a, const CheckPoint& b) { return a.x < b.x; });
  c.ran = !c.points.empty();
  if (!c.ran) {
    c.text = "not self-checked: no cache fraction between 0 and 1 was measured (--cache-fracs)";
    return c;
  }
  const CheckPoint* worst = &c.points.front();
  for (const CheckPoint& p : c.points) {
    if (p.error_pct() > worst->error_pct()) worst = &p;
    if (p.off(threshold_pct)) c.off.push_back(p);
  }
  c.max_error_pct = worst->error_pct();
  c.passed = c.off.empty();
  if (c.passed) {
    c.text = fmt::format(
        "self-check passed: the what-if is within {:.0f}% of every measured cache fraction "
        "(largest error {:.1f}%, at {:.0f}%)",
        threshold_pct, c.max_error_pct, 100 * worst->x);
    return c;
  }
  const double need = std::min(P, G);
  std::map<Cause, std::vector<CheckPoint>> by_cause;
  for (const CheckPoint& p : c.off) by_cause[cause_of(p, need, serial_model, reads_ahead)].push_back(p);
  for (const auto& [cause, pts] : by_cause) {
    c.cause += (c.cause.empty() ? "" : "; ") + cause_text(cause, pts, need, serial_model);
  }
  std::string listed;
  for (const CheckPoint& p : c.off) {
    listed +=
        fmt::format("{}{:.0f}% {}: measured {:.0f}/s, predicted {:.0f}/s{}, {:.1f}% off", listed.empty() ? "" : "; ",
                    100 * p.x, p.cache == CacheKind::Page ? "in the page cache" : "cached", p.measured, p.predicted,
                    p.hi > 0 ? fmt::format(" [{:.0f}-{:.0f}]", p.lo, p.hi) : std::string(), p.error_pct());
  }
  c.text = fmt::format("self-check failed: the what-if is more than {:.0f}% off at {} ({}); likely cause: {}",
                       threshold_pct, pct_list(c.off), listed, c.cause);
  return c;
}

Verdict checked_verdict(const Verdict& v, const SelfCheck& check) {
  if (check.passed) return Verdict{v.bound, v.text + "; " + check.text, v.inconclusive};
  // An inconclusive verdict keeps what would decide it: the self-check does not change the split.
  std::string why;
  if (v.inconclusive) {
    if (const auto colon = v.text.find(": "); colon != std::string::npos) why = v.text.substr(colon + 2) + "; ";
  }
  return Verdict{v.bound,
                 fmt::format("{}: {}no recommendation from the what-if, which does not fit this machine; {}", v.label(),
                             why, check.text),
                 v.inconclusive};
}

}  // namespace mlbench::stall
