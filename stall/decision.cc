#include "decision.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace mlbench::stall {

bool StallShare::claimed() const {
  return effective() > std::max(kMinStallPct, kSignificanceSigmas * noise_pp);
}

StallShare fetch_share(const Split& s, const SplitNoise& n, double F_obs, double S) {
  StallShare f;
  f.stall = Bound::Fetch;
  f.pct = s.fetch_pct;
  f.noise_pp = n.fetch_pp;
  f.resource_rate = S;
  f.consumer_rate = F_obs;
  f.max_pct = S > 0 && std::isfinite(S) ? std::min(100.0, 100.0 * kStorageTimeSlack * F_obs / S) : 100.0;
  return f;
}

StallShare prep_share(const Split& s, const SplitNoise& n, double G, double P, double F_obs) {
  StallShare p;
  p.stall = Bound::Prep;
  p.pct = s.prep_pct;
  p.noise_pp = n.prep_pp;
  p.resource_rate = P;
  p.consumer_rate = G;
  p.max_pct = P > 0 && G > 0 ? std::clamp(100.0 * F_obs * (1.0 / P - 1.0 / G), 0.0, 100.0) : 100.0;
  return p;
}

namespace {

// "1,236": a rate or ratio as the console prints it.
std::string grouped(double v) {
  std::string digits = fmt::format("{:.0f}", v);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
  return digits;
}

const char* stall_name(Bound b) {
  return b == Bound::Fetch ? "fetch" : "prep";
}

}  // namespace

std::string share_text(const StallShare& s) {
  const char* name = stall_name(s.stall);
  if (s.claimed()) return fmt::format("{} stall {:.1f}% (±{:.1f})", name, s.pct, s.noise_pp);
  std::string why;
  if (s.pct > s.max_pct + kSignificanceSigmas * s.noise_pp) {
    why = fmt::format("{:.1f}% ± {:.1f}, more than the rates allow", s.pct, s.noise_pp);
  } else if (s.pct <= kMinStallPct && s.noise_pp * kSignificanceSigmas < kMinStallPct) {
    why = fmt::format("{:.1f}%", s.pct);
  } else {
    why = fmt::format("{:.1f}% ± {:.1f}, within {:.0f}x its noise", s.pct, s.noise_pp, kSignificanceSigmas);
  }
  std::string rates;
  if (s.stall == Bound::Fetch && s.resource_rate > 0 && s.consumer_rate > 0) {
    const double ratio = s.resource_rate / s.consumer_rate;
    rates = ratio >= 1.5 ? fmt::format("; storage serves {} samples/s, {}x the consumer: at most {:.1f}% is possible",
                                       grouped(s.resource_rate), grouped(ratio), s.max_pct)
                         : fmt::format("; storage serves {} samples/s against the consumer's {}",
                                       grouped(s.resource_rate), grouped(s.consumer_rate));
  } else if (s.stall == Bound::Prep && s.resource_rate > 0 && s.consumer_rate > 0) {
    rates = s.resource_rate >= s.consumer_rate ? fmt::format("; prep runs at {} samples/s, no slower than compute's {}",
                                                             grouped(s.resource_rate), grouped(s.consumer_rate))
                                               : fmt::format("; prep {} samples/s against compute's {}",
                                                             grouped(s.resource_rate), grouped(s.consumer_rate));
  }
  const bool noisy = s.noise_pp * kSignificanceSigmas >= kMinStallPct && s.pct > kMinStallPct;
  return fmt::format("no measurable {} stall ({}{}){}", name, why, rates,
                     noisy ? "; more --rounds or --iterations narrow the noise" : "");
}

Decision decide(const DecisionInputs& in) {
  Decision d;
  // The split as judged: a share that is not a stall is time the consumer spent anyway.
  Split judged = in.split;
  if (!in.fetch.claimed()) judged.fetch_pct = 0;
  if (!in.prep.claimed()) judged.prep_pct = 0;
  judged.compute_pct = 100.0 - judged.fetch_pct - judged.prep_pct;
  d.bound = (in.fetch.claimed() || in.prep.claimed()) ? bound_of(judged) : Bound::Compute;

  d.ranked = rank_remedies(in.candidates);
  const auto claimed = [&](Bound b) { return b == Bound::Fetch ? in.fetch.claimed() : in.prep.claimed(); };
  for (const Remedy& r : d.ranked) {
    if (r.gain() < kMinRemedyGain) continue;  // remedy_text lists these as predicting no gain
    if (!claimed(r.stall)) {
      d.not_named.push_back(fmt::format("{} {}: no measurable {} stall", r.name, gain_text(r), stall_name(r.stall)));
    } else if (r.low() < kMinRemedyGain) {
      d.not_named.push_back(fmt::format("{} {}: its gain is within the rates' noise", r.name, gain_text(r)));
    } else if (!d.remedy) {
      d.remedy = r;
    }
  }
  if (d.remedy) {
    d.remedy_text = remedy_text({*d.remedy});  // its "helps most" line: the remedy passed best_remedy's bar
  } else if (!d.not_named.empty()) {
    std::string why;
    for (const std::string& n : d.not_named) why += (why.empty() ? "" : "; ") + n;
    d.remedy_text = "none named (" + why + ")";
  } else {
    d.remedy_text = remedy_text(d.ranked);
  }

  // The verdict from the same judgement: a cache only for a fetch stall, CPUs only for a prep one.
  const std::optional<double> cache = in.fetch.claimed() ? in.cache_rec : std::optional<double>(0.0);
  const std::optional<int> cores = in.prep.claimed() ? in.cores_rec : std::optional<int>(in.cores_now);
  Verdict v = verdict(judged, cache, cores, in.cores_now);
  v.bound = d.bound;
  if (d.bound == Bound::Compute && !in.fetch.claimed() && !in.prep.claimed()) {
    v.text = fmt::format(
        "compute-bound: no measurable stall (compute {:.0f}% of the cold epoch, the stall shares "
        "within their noise or beyond what the rates allow), so neither DRAM nor CPUs help",
        in.split.compute_pct);
  } else if (d.bound == Bound::Compute) {
    v.text =
        fmt::format("compute-bound: the accelerator is the limit ({:.0f}% of the time computing)", judged.compute_pct);
    if (d.remedy) {
      v.text += fmt::format("; the {} stall left ({:.0f}%) is worth {} ({})", stall_name(d.remedy->stall),
                            d.remedy->stall == Bound::Fetch ? in.fetch.pct : in.prep.pct, d.remedy->name,
                            gain_text(*d.remedy));
    } else {
      v.text += "; neither DRAM nor CPUs help beyond the noise";
    }
  }
  d.verdict = v.text;
  return d;
}

}  // namespace mlbench::stall
