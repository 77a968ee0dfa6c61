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

double StallShare::upper() const {
  const double u = std::min(100.0, pct + kSignificanceSigmas * noise_pp);
  return stall == Bound::Fetch ? std::min(u, max_pct) : u;
}

bool split_decides(const StallShare& fetch, const StallShare& prep) {
  return fetch.claimed() || prep.claimed() || fetch.upper() + prep.upper() < kComputeBoundStallPct;
}

std::optional<double> measure_factor(const StallShare& fetch, const StallShare& prep) {
  // Steps of 5% up to kMaxMeasureFactor: the answer is an estimate ("~2.2x"), not a bisection.
  for (double k = 1.0; k <= kMaxMeasureFactor * 1.0001; k *= 1.05) {
    StallShare f = fetch, p = prep;
    f.noise_pp /= std::sqrt(k);
    p.noise_pp /= std::sqrt(k);
    if (split_decides(f, p)) return k;
  }
  return std::nullopt;
}

namespace {

// "~2.2x longer (--iterations 27 or --rounds 3)": the measuring that would decide, in the flags.
std::string measure_longer_text(std::optional<double> factor, int iterations, int rounds) {
  if (!factor) {
    return fmt::format(
        "not even {:.0f}x longer would decide it at these shares: measure on a quieter machine, or more --rounds",
        kMaxMeasureFactor);
  }
  const double k = *factor;
  const int r = std::max(2, static_cast<int>(std::ceil(k * std::max(1, rounds))));
  const std::string flags =
      iterations > 0 ? fmt::format("--iterations {} or --rounds {}", static_cast<int>(std::ceil(k * iterations)), r)
                     : fmt::format("--rounds {}", r);
  return fmt::format("measure ~{}x longer to decide ({})", k < 10 ? fmt::format("{:.1f}", k) : fmt::format("{:.0f}", k),
                     flags);
}

// "compute 59% and a prep stall of 41% (±13)": the shares of a verdict whose compute share is the
// larger, with the claimed stalls beside it.
std::string shares_text(double compute_pct, const StallShare& fetch, const StallShare& prep) {
  std::vector<std::string> stalls;
  for (const StallShare* s : {&fetch, &prep}) {
    if (s->claimed()) {
      stalls.push_back(fmt::format("a {} stall of {:.0f}% (±{:.0f})", stall_name(s->stall), s->pct, s->noise_pp));
    }
  }
  std::string out = fmt::format("compute {:.0f}%", compute_pct);
  for (std::size_t i = 0; i < stalls.size(); ++i) out += (i + 1 == stalls.size() ? " and " : ", ") + stalls[i];
  return out;
}

}  // namespace

Decision decide(const DecisionInputs& in) {
  Decision d;
  // The split as judged: a share that is not a stall is time the consumer spent anyway.
  Split judged = in.split;
  if (!in.fetch.claimed()) judged.fetch_pct = 0;
  if (!in.prep.claimed()) judged.prep_pct = 0;
  judged.compute_pct = 100.0 - judged.fetch_pct - judged.prep_pct;
  const bool any_claimed = in.fetch.claimed() || in.prep.claimed();
  // The bound follows the split: any claimed stall is a wait for data, the larger one names it.
  if (any_claimed) {
    d.bound = !in.prep.claimed()                            ? Bound::Fetch
              : !in.fetch.claimed()                         ? Bound::Prep
              : in.fetch.effective() >= in.prep.effective() ? Bound::Fetch
                                                            : Bound::Prep;
  }
  d.inconclusive = !split_decides(in.fetch, in.prep);
  if (d.inconclusive) d.measure_factor = measure_factor(in.fetch, in.prep);

  d.ranked = rank_remedies(in.candidates);
  const auto claimed = [&](Bound b) { return b == Bound::Fetch ? in.fetch.claimed() : in.prep.claimed(); };
  std::optional<std::string> cpus_unsized;  // why "more CPUs" was not named for a claimed prep stall
  for (const Remedy& r : d.ranked) {
    if (r.gain() < kMinRemedyGain) continue;  // remedy_text lists these as predicting no gain
    std::string why;
    if (!claimed(r.stall)) {
      why = fmt::format("no measurable {} stall", stall_name(r.stall));
    } else if (!r.has_range()) {
      why = "measured once: no range";
    } else if (r.low() < kMinRemedyGain) {
      why = "its gain is within the rates' noise";
    } else if (!d.remedy) {
      d.remedy = r;
      continue;
    } else {
      continue;
    }
    d.not_named.push_back(fmt::format("{} {}: {}", r.name, gain_text(r), why));
    if (r.stall == Bound::Prep && r.name == "more CPUs" && claimed(Bound::Prep) && !cpus_unsized) {
      cpus_unsized = fmt::format(
          "more CPUs may help, but {} ({} {}): {}",
          r.has_range() ? "the CPU sweep is too noisy to size them" : "the runs they rest on were measured once",
          r.name, gain_text(r), r.has_range() ? "more --rounds or --iterations narrow it" : "--rounds 2 gives a range");
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
  Verdict v{d.bound, "", d.inconclusive};
  if (any_claimed) {
    const std::optional<double> cache = in.fetch.claimed() ? in.cache_rec : std::optional<double>(0.0);
    const std::optional<int> cores = in.prep.claimed() ? in.cores_rec : std::optional<int>(in.cores_now);
    v.text = stall_verdict_text(d.bound, cache, cores, in.cores_now, cpus_unsized.value_or(""));
    // Compute the larger share: the verdict still names the stall, with compute's share beside it.
    if (judged.compute_pct >= judged.prep_pct + judged.fetch_pct) {
      const std::string label = std::string(to_string(d.bound)) + ": ";
      v.text = label + shares_text(judged.compute_pct, in.fetch, in.prep) + ": " + v.text.substr(label.size());
    }
  } else if (d.inconclusive) {
    v.text = fmt::format(
        "inconclusive: no share is beyond twice its noise (compute {:.1f}% ± {:.1f}, prep {:.1f}% ± {:.1f}, fetch "
        "{:.1f}% ± {:.1f}), and the stalls within it (up to {:.0f}% together) could outweigh compute; {}",
        in.split.compute_pct, in.compute_noise_pp, in.prep.pct, in.prep.noise_pp, in.fetch.pct, in.fetch.noise_pp,
        std::min(100.0, in.fetch.upper() + in.prep.upper()),
        measure_longer_text(d.measure_factor, in.iterations, in.rounds));
  } else {
    const double hidden = in.fetch.upper() + in.prep.upper();
    v.text = fmt::format(
        "compute-bound: no measurable stall (compute {:.0f}% of the cold epoch, the stall shares within their noise "
        "or beyond what the rates allow), so neither DRAM nor CPUs help",
        in.split.compute_pct);
    // A stall a remedy could still remove (its removal worth kMinRemedyGain) within the noise.
    if (hidden >= 100.0 * (1.0 - 1.0 / kMinRemedyGain)) {
      v.text += fmt::format(" beyond the noise (stalls of at most {:.0f}% together are within it)", hidden);
    }
  }
  d.verdict = v.text;
  return d;
}

}  // namespace mlbench::stall
