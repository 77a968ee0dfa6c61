#include "ranks.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "decision.h"

namespace mlbench::stall {
namespace {

struct Stat {
  double avg = 0, sd = 0;
  int count = 0;
  bool known = false;
};

Stat stat_of(const nlohmann::json& block, const char* key) {
  Stat s;
  if (!block.contains(key) || !block[key].is_object()) return s;
  const auto& j = block[key];
  if (!j.contains("avg") || !j["avg"].is_number()) return s;
  s.known = true;
  s.avg = j["avg"].get<double>();
  s.count = j.value("count", 0);
  if (j.contains("sd") && j["sd"].is_number()) s.sd = j["sd"].get<double>();
  return s;
}

std::optional<int> int_of(const nlohmann::json& j, const char* key) {
  if (j.contains(key) && j[key].is_number_integer()) return j[key].get<int>();
  return std::nullopt;
}

double ms(double s) {
  return 1e3 * s;
}

std::vector<double> numbers_of(const nlohmann::json& block, const char* key) {
  std::vector<double> out;
  if (!block.contains(key) || !block[key].is_array()) return out;
  for (const auto& v : block[key]) out.push_back(v.is_number() ? v.get<double>() : 0.0);
  return out;
}

double pct_of(double part, double whole) {
  return whole > 0 ? 100 * part / whole : 0;
}

double rounded(double v) {
  return std::round(10 * v) / 10;
}

}  // namespace

std::optional<std::string> RankFigures::cause() const {
  if (!split_known || iteration_s <= 0 || 100 * wait_s / iteration_s < kStragglerMinPct) return std::nullopt;
  return std::string(prep_s >= fetch_s ? "prep" : "fetch");
}

void add_split(std::vector<RankFigures>& cold, const std::vector<RankFigures>& cached,
               const std::vector<RankFigures>& synthetic) {
  const auto find = [](const std::vector<RankFigures>& in, int rank) -> const RankFigures* {
    for (const auto& r : in) {
      if (r.rank == rank) return &r;
    }
    return nullptr;
  };
  for (auto& r : cold) {
    const RankFigures* p = find(cached, r.rank);
    const RankFigures* g = find(synthetic, r.rank);
    if (!p || !g) continue;
    r.split_known = true;
    r.cached_wait_s = p->wait_s;
    r.synthetic_wait_s = g->wait_s;
    r.fetch_s = std::clamp(r.wait_s - p->wait_s, 0.0, r.wait_s);
    r.prep_s = std::clamp(p->wait_s - g->wait_s, 0.0, r.wait_s - r.fetch_s);
    r.split_compute_s = r.iteration_s - r.sync_s - r.fetch_s - r.prep_s;
  }
}

std::optional<RankFigures> rank_figures(const nlohmann::json& report, const std::filesystem::path& file) {
  if (!report.is_object() || !report.contains("stall") || !report["stall"].is_object()) return std::nullopt;
  const auto& st = report["stall"];
  const Stat wait = stat_of(st, "wait"), compute = stat_of(st, "compute"), sync = stat_of(st, "sync");
  if (!wait.known || !compute.known) return std::nullopt;
  RankFigures f;
  f.report = file;
  if (report.contains("rank") && report["rank"].is_object()) {
    const auto& r = report["rank"];
    f.rank = int_of(r, "rank").value_or(0);
    f.local_rank = int_of(r, "local_rank");
    f.world_size = int_of(r, "world_size").value_or(1);
    f.from = r.value("from", std::string("none"));
    if (r.contains("host") && r["host"].is_string()) f.host = r["host"].get<std::string>();
  }
  if (report.contains("train_item") && report["train_item"].is_object()) {
    const auto& t = report["train_item"];
    if (t.contains("avg") && t["avg"].is_number()) f.rate = t["avg"].get<double>();
  }
  f.iterations = wait.count;
  f.wait_s = wait.avg;
  f.wait_sd = wait.sd;
  f.compute_s = compute.avg;
  f.sync_measured = sync.known;
  f.sync_s = sync.avg;
  f.sync_sd = sync.sd;
  f.iteration_s = f.wait_s + f.sync_s + f.compute_s;
  if (st.contains("steps") && st["steps"].is_object()) {
    const auto& steps = st["steps"];
    f.first_step = int_of(steps, "first").value_or(0);
    f.step_wait = numbers_of(steps, "wait");
    f.step_sync = numbers_of(steps, "sync");
    f.step_compute = numbers_of(steps, "compute");
    if (f.step_sync.size() != f.step_wait.size() || f.step_compute.size() != f.step_wait.size()) {
      f.step_wait.clear();  // a block cut short: no per-step figures rather than misaligned ones
      f.step_sync.clear();
      f.step_compute.clear();
    }
  }
  return f;
}

JobFigures job_figures(std::vector<RankFigures> ranks) {
  JobFigures job;
  std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  job.ranks = std::move(ranks);
  if (job.ranks.empty()) return job;
  const auto k = static_cast<double>(job.ranks.size());
  double slowest = job.ranks.front().rate;
  job.split_known = true;
  for (const auto& r : job.ranks) {
    slowest = std::min(slowest, r.rate);
    job.step_s = std::max(job.step_s, r.iteration_s);
    job.split_known = job.split_known && r.split_known && r.iteration_s > 0;
  }
  job.rate = slowest * k;
  // The job's split: each rank's shares of its own step, averaged over the ranks (the ranks' time).
  if (job.split_known) {
    for (const auto& r : job.ranks) {
      job.compute_pct += pct_of(r.split_compute_s, r.iteration_s) / k;
      job.prep_pct += pct_of(r.prep_s, r.iteration_s) / k;
      job.fetch_pct += pct_of(r.fetch_s, r.iteration_s) / k;
      job.sync_pct += pct_of(r.sync_s, r.iteration_s) / k;
    }
  }
  // Step by step, over the steps every rank recorded: the late rank and its lateness.
  bool per_step = job.ranks.size() > 1;
  int lo = 0, hi = 0;
  for (const auto& r : job.ranks) {
    per_step = per_step && !r.step_wait.empty();
    if (&r == &job.ranks.front()) {
      lo = r.first_step;
      hi = r.first_step + static_cast<int>(r.step_wait.size());
    }
    lo = std::max(lo, r.first_step);
    hi = std::min(hi, r.first_step + static_cast<int>(r.step_wait.size()));
  }
  if (per_step && hi > lo) {
    job.steps = hi - lo;
    const double floor_s = kStragglerMinPct / 100 * job.step_s;
    for (int i = lo; i < hi; ++i) {
      std::size_t late = 0;
      double sum = 0;
      for (std::size_t r = 0; r < job.ranks.size(); ++r) {
        const double w = job.ranks[r].step_wait[i - job.ranks[r].first_step];
        sum += w;
        if (w > job.ranks[late].step_wait[i - job.ranks[late].first_step]) late = r;
      }
      const double w_late = job.ranks[late].step_wait[i - job.ranks[late].first_step];
      const double lateness = w_late - (sum - w_late) / (k - 1);
      if (lateness > 0 && lateness >= floor_s) {
        job.ranks[late].late_steps += 1;
        job.ranks[late].delay_s += lateness;
      } else {
        job.on_time_steps += 1;
      }
    }
  }
  const auto latest = std::max_element(job.ranks.begin(), job.ranks.end(),
                                       [](const auto& a, const auto& b) { return a.wait_s < b.wait_s; });
  job.latest = latest->rank;
  if (job.ranks.size() < 2) {
    job.text = fmt::format("one rank (rank {}): no straggler to name", job.latest);
    return job;
  }
  // The latest rank's mean wait against the others' mean, each mean's standard error from its
  // iterations' spread (the iterations taken as independent; the materiality floor below holds
  // where they are not).
  double others_wait = 0, others_var = 0;
  const double n_others = k - 1;
  for (const auto& r : job.ranks) {
    if (r.rank == latest->rank) continue;
    others_wait += r.wait_s / n_others;
    job.others_sync_s += r.sync_s / n_others;
    others_var += r.wait_sd * r.wait_sd / std::max(1, r.iterations) / (n_others * n_others);
  }
  job.late_s = latest->wait_s - others_wait;
  job.noise_s = std::sqrt(latest->wait_sd * latest->wait_sd / std::max(1, latest->iterations) + others_var);
  const bool beyond_noise = job.late_s > kSignificanceSigmas * job.noise_s;
  const bool material = job.step_s > 0 && 100 * job.late_s / job.step_s >= kStragglerMinPct;
  if (beyond_noise && material) job.straggler = latest->rank;
  const bool several = job.ranks.size() > 2;
  const std::string late_at =
      job.steps > 0 ? fmt::format("; late at {} of {} steps", latest->late_steps, job.steps) : std::string();
  if (job.straggler) {
    job.cause = latest->cause();
    std::string others_sync;
    if (several) {
      others_sync = fmt::format("the other ranks waited {:.1f} ms/step at collectives (their mean)", ms(job.others_sync_s));
    } else {
      for (const auto& r : job.ranks) {
        if (r.rank != latest->rank) {
          others_sync = fmt::format("rank {} waited {:.1f} ms/step at collectives", r.rank, ms(r.sync_s));
        }
      }
    }
    job.text = fmt::format(
        "straggler: rank {} ({}: its data wait {:.1f} ms/step, {:.0f}% of the {:.1f} ms step, +{:.1f} ms ±{:.1f} over "
        "the other rank{}'{}{}); {}",
        latest->rank,
        job.cause ? *job.cause : std::string(latest->split_known ? "data" : "data, prep or fetch: not split"),
        ms(latest->wait_s), pct_of(latest->wait_s, job.step_s), ms(job.step_s), ms(job.late_s), ms(job.noise_s),
        several ? "s" : "", several ? "" : "s", late_at, others_sync);
  } else {
    int most = 0;
    for (const auto& r : job.ranks) most = std::max(most, r.late_steps);
    job.text = fmt::format(
        "balanced: no rank's data wait stands out (rank {}'s, the largest, {:+.1f} ms ±{:.1f} per step against the "
        "others', needs {:.0f} sigma and {:.0f}% of the {:.1f} ms step){}",
        latest->rank, ms(job.late_s), ms(job.noise_s), kSignificanceSigmas, kStragglerMinPct, ms(job.step_s),
        job.steps > 0 ? fmt::format("; on time at {} of {} steps, no rank late at more than {}", job.on_time_steps,
                                    job.steps, most)
                      : std::string());
  }
  return job;
}

nlohmann::json ranks_json(const JobFigures& job) {
  nlohmann::json out = nlohmann::json::array();
  const auto pct = [](double v) { return std::round(10 * v) / 10; };
  for (const auto& r : job.ranks) {
    out.push_back({{"rank", r.rank},
                   {"local_rank", r.local_rank ? nlohmann::json(*r.local_rank) : nlohmann::json()},
                   {"world_size", r.world_size},
                   {"from", r.from},
                   {"host", r.host},
                   {"rate", r.rate},
                   {"iterations", r.iterations},
                   {"wait_ms", ms(r.wait_s)},
                   {"sync_ms", r.sync_measured ? nlohmann::json(ms(r.sync_s)) : nlohmann::json()},
                   {"compute_ms", ms(r.compute_s)},
                   {"iteration_ms", ms(r.iteration_s)},
                   {"wait_pct", pct(r.wait_pct())},
                   {"sync_pct", r.sync_measured ? nlohmann::json(pct(r.sync_pct())) : nlohmann::json()},
                   {"compute_pct", pct(r.compute_pct())},
                   {"split", r.split_known ? nlohmann::json{{"compute_pct", pct(pct_of(r.split_compute_s, r.iteration_s))},
                                                            {"prep_pct", pct(pct_of(r.prep_s, r.iteration_s))},
                                                            {"fetch_pct", pct(pct_of(r.fetch_s, r.iteration_s))},
                                                            {"sync_pct", pct(pct_of(r.sync_s, r.iteration_s))},
                                                            {"compute_ms", ms(r.split_compute_s)},
                                                            {"prep_ms", ms(r.prep_s)},
                                                            {"fetch_ms", ms(r.fetch_s)},
                                                            {"sync_ms", ms(r.sync_s)},
                                                            {"cached_wait_ms", ms(r.cached_wait_s)},
                                                            {"synthetic_wait_ms", ms(r.synthetic_wait_s)}}
                                          : nlohmann::json()},
                   {"cause", r.cause() ? nlohmann::json(*r.cause()) : nlohmann::json()},
                   {"late_steps", job.steps > 0 ? nlohmann::json(r.late_steps) : nlohmann::json()},
                   {"delay_ms", job.steps > 0 ? nlohmann::json(ms(r.delay_s)) : nlohmann::json()},
                   {"report", r.report.string()}});
  }
  return out;
}

nlohmann::json job_json(const JobFigures& job, const std::string& run) {
  return {{"run", run},
          {"ranks", job.ranks.size()},
          {"rate", job.rate},
          {"rate_from", "the slowest rank's samples/s x the ranks (a synchronous job steps at its slowest rank)"},
          {"straggler", job.straggler ? nlohmann::json(*job.straggler) : nlohmann::json()},
          {"balanced", !job.straggler.has_value()},
          {"latest_rank", job.latest},
          {"late_ms", ms(job.late_s)},
          {"noise_ms", ms(job.noise_s)},
          {"step_ms", ms(job.step_s)},
          {"step_from", "the slowest rank's mean iteration (a synchronous job's step ends when its slowest rank's does)"},
          {"split", job.split_known ? nlohmann::json{{"compute_pct", rounded(job.compute_pct)},
                                                     {"prep_pct", rounded(job.prep_pct)},
                                                     {"fetch_pct", rounded(job.fetch_pct)},
                                                     {"sync_pct", rounded(job.sync_pct)},
                                                     {"compute_ms", job.compute_pct / 100 * ms(job.step_s)},
                                                     {"prep_ms", job.prep_pct / 100 * ms(job.step_s)},
                                                     {"fetch_ms", job.fetch_pct / 100 * ms(job.step_s)},
                                                     {"sync_ms", job.sync_pct / 100 * ms(job.step_s)},
                                                     {"of", "the ranks' time: each rank's shares of its own step, "
                                                            "averaged over the ranks"}}
                                    : nlohmann::json()},
          {"cause", job.cause ? nlohmann::json(*job.cause) : nlohmann::json()},
          {"steps", job.steps},
          {"on_time_steps", job.steps > 0 ? nlohmann::json(job.on_time_steps) : nlohmann::json()},
          {"others_sync_ms", ms(job.others_sync_s)},
          {"sigmas", kSignificanceSigmas},
          {"min_pct", kStragglerMinPct},
          {"text", job.text}};
}

void add_ranks_block(const std::map<std::string, RunOutcome>& runs, nlohmann::json& result) {
  std::optional<std::string> chosen;
  for (const char* label : {"cold", "cached"}) {
    const auto it = runs.find(label);
    if (!chosen && it != runs.end() && !it->second.ranks.empty()) chosen = label;
  }
  const auto figures_of = [&](const std::string& label) {
    std::vector<RankFigures> figures;
    const auto it = runs.find(label);
    if (it == runs.end()) return figures;
    for (const auto& one : it->second.ranks) {
      if (auto f = rank_figures(one.report, one.report_path)) figures.push_back(*f);
    }
    return figures;
  };
  for (const auto& [label, r] : runs) {
    if (r.ranks.empty()) continue;
    std::vector<RankFigures> figures = figures_of(label);
    if (figures.empty()) continue;
    // The cold run is the job as it runs: its ranks split by the cached and synthetic runs'.
    if (label == "cold") add_split(figures, figures_of("cached"), figures_of("synthetic"));
    const JobFigures job = job_figures(std::move(figures));
    if (result.contains("runs") && result["runs"].contains(label)) {
      result["runs"][label]["ranks"] = ranks_json(job);
      result["runs"][label]["job"] = job_json(job, label);
    }
    if (!chosen) chosen = label;
    if (*chosen == label) {
      result["ranks"] = ranks_json(job);
      result["job"] = job_json(job, label);
    }
  }
}

std::string ranks_text(const nlohmann::json& result) {
  if (!result.contains("job") || !result["job"].is_object() || !result.contains("ranks")) return "";
  const auto& job = result["job"];
  std::string out = fmt::format("ranks: {} (the {} run):", job.value("ranks", 0), job.value("run", std::string()));
  for (const auto& r : result["ranks"]) {
    const auto sync = r["sync_pct"];
    const auto split = r.value("split", nlohmann::json());
    if (split.is_object()) {
      out += fmt::format(" rank {} {:.1f}/s compute {:.0f}% prep {:.0f}% fetch {:.0f}% sync {:.0f}%;",
                         r.value("rank", 0), r.value("rate", 0.0), split.value("compute_pct", 0.0),
                         split.value("prep_pct", 0.0), split.value("fetch_pct", 0.0), split.value("sync_pct", 0.0));
      continue;
    }
    out += fmt::format(" rank {} {:.1f}/s wait {:.0f}% sync {} compute {:.0f}%;", r.value("rank", 0),
                       r.value("rate", 0.0), r.value("wait_pct", 0.0),
                       sync.is_number() ? fmt::format("{:.0f}%", sync.get<double>()) : std::string("n/a"),
                       r.value("compute_pct", 0.0));
  }
  out.back() = '\n';
  if (const auto split = job.value("split", nlohmann::json()); split.is_object()) {
    const auto cause = job.value("cause", nlohmann::json()), straggler = job.value("straggler", nlohmann::json());
    out += fmt::format(
        "job: compute {:.1f}%, prep stall {:.1f}%, fetch stall {:.1f}%, sync wait {:.1f}% of its {} ranks' time "
        "({:.1f} ms a step, the slowest rank's){}\n",
        split.value("compute_pct", 0.0), split.value("prep_pct", 0.0), split.value("fetch_pct", 0.0),
        split.value("sync_pct", 0.0), job.value("ranks", 0), job.value("step_ms", 0.0),
        cause.is_string() && straggler.is_number_integer()
            ? fmt::format("; the sync wait is rank {}'s lateness ({})", straggler.get<int>(), cause.get<std::string>())
            : std::string());
  }
  out += job.value("text", std::string()) + "\n";
  return out;
}

}  // namespace mlbench::stall
