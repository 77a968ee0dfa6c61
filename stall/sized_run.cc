// A run measured until its noise is within the target (see sized_run.h).
#include "sized_run.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace mlbench::stall {

namespace {

// The value after `flag` in `args`, or -1.
long flag_value(const std::vector<std::string>& args, const std::string& flag) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) {
      try {
        return std::stol(args[i + 1]);
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  return -1;
}

void set_flag(std::vector<std::string>& args, const std::string& flag, long value) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) args[i + 1] = std::to_string(value);
  }
}

// The timed observations' seconds from the report's train block (avg x count), 0 when it has none.
RunPart part_of(const RunOutcome& r) {
  double timed = 0;
  if (r.report.is_object()) {
    const auto train = r.record().train;
    if (train && train->avg && train->count > 0) timed = *train->avg * static_cast<double>(train->count);
  }
  return {r.rate, r.cv, r.observations, r.wall_s, timed};
}

nlohmann::json pct_or_null(const std::optional<double>& x) {
  return x ? nlohmann::json(100 * *x) : nlohmann::json();
}

}  // namespace

RunSpec lengthened(const RunSpec& spec, double scale) {
  RunSpec s = spec;
  const long repeat = flag_value(s.args, "--repeat");
  const long warmup = flag_value(s.args, "--warmup");
  if (repeat > 0 && warmup >= 0 && repeat > warmup) {
    const long timed = std::max(1L, std::lround(std::ceil(static_cast<double>(repeat - warmup) * scale)));
    set_flag(s.args, "--repeat", warmup + timed);
    return s;
  }
  const auto it = s.env.find("MLBENCH_PROBE_ITERATIONS");
  const auto nt = s.env.find("MLBENCH_PROBE_NUMBER");
  if (it != s.env.end() && nt != s.env.end()) {
    try {
      const long iterations = std::stol(it->second);
      const long number = std::max(1L, std::stol(nt->second));
      const long observations =
          std::max(1L, std::lround(std::ceil(static_cast<double>(iterations) / static_cast<double>(number) * scale)));
      it->second = std::to_string(observations * number);
    } catch (const std::exception&) {
      // not a number: the same length again
    }
  }
  return s;
}

std::string extension_label(const std::string& label, int k) {
  return fmt::format("{}-ext{}", label, k);
}

RunOutcome pool_outcomes(const std::vector<RunOutcome>& parts) {
  if (parts.empty()) throw std::invalid_argument("pool_outcomes: no parts");
  RunOutcome out = parts.front();
  if (parts.size() == 1) return out;
  std::vector<RunPart> p;
  for (const RunOutcome& r : parts) p.push_back(part_of(r));
  const RunPart all = pool(p);
  out.rate = all.rate;
  out.cv = all.cv;
  out.observations = all.observations;
  out.wall_s = all.wall_s;
  out.after = parts.back().after;
  out.held = std::all_of(parts.begin(), parts.end(), [](const RunOutcome& r) { return r.held; });
  for (const RunOutcome& r : parts) {
    if (out.rate_from.empty() && !r.rate_from.empty()) out.rate_from = r.rate_from;
  }
  return out;
}

SizedOutcome measure_sized(Executor& executor, const RunSpec& spec, const SizingRule& rule, const OnPart& on_part,
                           SizingBudget* budget) {
  std::vector<RunOutcome> made;
  std::vector<RunPart> parts;
  made.push_back(executor.run(spec));
  if (on_part) on_part(spec, made.back());
  parts.push_back(part_of(made.back()));
  SizingBudget own;
  SizingBudget& shared = budget ? *budget : own;
  if (rule.target > 0) shared.left_s += (kAutoLimit - 1) * std::max(0.0, made.back().wall_s);
  const double left = shared.left_s;
  SizingStep step = next_step(rule, parts, left);
  bool failed = false;
  while (!step.done) {
    RunSpec next = lengthened(spec, step.scale);
    next.label = extension_label(spec.label, static_cast<int>(made.size()) + 1);
    try {
      made.push_back(executor.run(next));
    } catch (const Interrupted&) {
      throw;
    } catch (const RunFailed&) {
      failed = true;  // what was measured stands; its noise is what it is
      break;
    }
    if (on_part) on_part(next, made.back());
    parts.push_back(part_of(made.back()));
    shared.left_s -= made.back().wall_s;
    step = next_step(rule, parts, left);
  }
  SizedOutcome out;
  out.outcome = pool_outcomes(made);
  RunSizing& s = out.sizing;
  s.parts = static_cast<int>(made.size());
  s.wall_s = out.outcome.wall_s;
  s.half_width = relative_half_width(out.outcome.cv, out.outcome.observations);
  s.target = rule.target;
  s.limit_s = step.limit_s;
  s.within = rule.target <= 0 || (s.half_width && *s.half_width <= rule.target);
  s.limit_hit = !s.within && (step.limit_hit || failed);
  if (s.limit_hit) {
    s.stopped_by = failed              ? "a failed extension"
                   : step.parts_capped ? fmt::format("most extensions ({})", rule.max_extensions)
                                       : "time limit";
  }
  for (const RunOutcome& r : made) s.part_rates.push_back(r.rate);
  return out;
}

nlohmann::json label_sizing_json(const std::vector<RunSizing>& rounds, std::size_t chosen) {
  if (rounds.empty()) return nullptr;
  const RunSizing& c = rounds.at(std::min(chosen, rounds.size() - 1));
  double wall = 0;
  int extensions = 0;
  bool limit_hit = false;
  for (const RunSizing& r : rounds) {
    wall += r.wall_s;
    extensions += r.parts - 1;
    limit_hit = limit_hit || r.limit_hit;
  }
  nlohmann::json parts = nlohmann::json::array();
  for (const RunSizing& r : rounds) parts.push_back(r.parts);
  return {{"duration_s", wall},
          {"half_width_pct", pct_or_null(c.half_width)},
          {"target_pct", c.target > 0 ? nlohmann::json(100 * c.target) : nlohmann::json()},
          {"within", c.within},
          {"limit_hit", limit_hit},
          {"limit_s", c.limit_s},
          {"stopped_by", c.stopped_by.empty() ? nlohmann::json() : nlohmann::json(c.stopped_by)},
          {"rounds", rounds.size()},
          {"extensions", extensions},
          {"parts_by_round", parts},
          {"part_rates", c.part_rates}};
}

std::string sizing_line(const std::string& label, const RunSizing& s) {
  if (s.target <= 0 || (s.parts == 1 && s.within) || !s.half_width) return "";
  const std::string noise = fmt::format("±{:.1f}% (95%)", 100 * *s.half_width);
  if (s.within) {
    return fmt::format("  {:<14} {} after {} parts, {:.1f} s\n", label, noise, s.parts, s.wall_s);
  }
  const std::string limit = s.stopped_by == "time limit" || s.stopped_by.empty()
                                ? fmt::format("in its time limit of {:.1f} s", s.limit_s)
                                : "at its " + s.stopped_by;
  return fmt::format("  {:<14} {} after {} part{}, {:.1f} s: not within ±{:.1f}% {}; its range is the noise measured\n",
                     label, noise, s.parts, s.parts == 1 ? "" : "s", s.wall_s, 100 * s.target, limit);
}

nlohmann::json sizing_json(const SizingRule& rule, const RoundsSizing& rounds,
                           const std::map<std::string, std::vector<RunSizing>>& by_label,
                           const std::map<std::string, std::size_t>& chosen) {
  nlohmann::json not_within = nlohmann::json::object();
  double wall = 0;
  int runs = 0, extended = 0;
  for (const auto& [label, made] : by_label) {
    const auto at = chosen.find(label);
    const RunSizing& c = made.at(at == chosen.end() ? 0 : std::min(at->second, made.size() - 1));
    for (const RunSizing& r : made) {
      wall += r.wall_s;
      ++runs;
      extended += r.parts > 1 ? 1 : 0;
    }
    if (rule.target > 0 && !c.within) not_within[label] = pct_or_null(c.half_width);
  }
  nlohmann::json added = nlohmann::json::array();
  for (const DriftCheck& d : rounds.added) {
    added.push_back({{"label", d.label}, {"spread_pct", 100 * d.spread}, {"effect_pct", 100 * d.effect}});
  }
  return {{"rule", rule.target > 0 ? "noise" : "fixed"},
          {"target_pct", rule.target > 0 ? nlohmann::json(100 * rule.target) : nlohmann::json()},
          {"confidence", 0.95},
          {"max_run_s", rule.max_run_s > 0 ? nlohmann::json(rule.max_run_s) : nlohmann::json()},
          {"auto_limit", kAutoLimit},
          {"runs", runs},
          {"extended", extended},
          {"duration_s", wall},
          {"not_within", not_within},
          {"rounds", {{"floor", rounds.floor}, {"most", rounds.most}, {"made", rounds.made}, {"added", added}}}};
}

std::string sizing_summary(const nlohmann::json& s) {
  if (!s.is_object()) return "";
  std::string out;
  const bool fixed = s.value("rule", "") == "fixed";
  const double target = s["target_pct"].is_number() ? s["target_pct"].get<double>() : 0;
  out += fmt::format("sized: {} runs, {:.1f} s of measuring{}", s.value("runs", 0), s.value("duration_s", 0.0),
                     fixed ? ", fixed (--target-noise 0)"
                           : fmt::format(", to ±{:.1f}% (95%); {} extended", target, s.value("extended", 0)));
  const auto& nw = s["not_within"];
  if (!fixed && nw.is_object() && !nw.empty()) {
    std::string names;
    for (const auto& [label, hw] : nw.items()) {
      names += fmt::format("{}{} {}", names.empty() ? "" : ", ", label,
                           hw.is_number() ? fmt::format("±{:.1f}%", hw.get<double>()) : std::string("?"));
    }
    out += fmt::format(
        "; not within it in their time: {} (their ranges are the noise measured; --max-run-time S "
        "measures longer)",
        names);
  } else if (!fixed) {
    out += "; every run within it";
  }
  out += "\n";
  const auto& r = s["rounds"];
  if (r.is_object() && r.value("made", 1) > r.value("floor", 1)) {
    for (const auto& a : r["added"]) {
      out += fmt::format("round added: {}'s rounds spread {:.1f}%, more than the {:.1f}% effect the split measures\n",
                         a.value("label", ""), a.value("spread_pct", 0.0), a.value("effect_pct", 0.0));
    }
  }
  return out;
}

}  // namespace mlbench::stall
