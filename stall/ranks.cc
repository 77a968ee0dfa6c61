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

}  // namespace

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
  return f;
}

JobFigures job_figures(std::vector<RankFigures> ranks) {
  JobFigures job;
  std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  job.ranks = std::move(ranks);
  if (job.ranks.empty()) return job;
  const auto k = static_cast<double>(job.ranks.size());
  double slowest = job.ranks.front().rate;
  for (const auto& r : job.ranks) {
    slowest = std::min(slowest, r.rate);
    job.step_s += r.iteration_s / k;
  }
  job.rate = slowest * k;
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
  if (job.straggler) {
    job.text = fmt::format(
        "straggler: rank {}, its data wait {:.1f} ms per step against {:.1f} ms on the other rank{} (+{:.1f} ms "
        "±{:.1f}, {:.0f}% of the job's {:.1f} ms step); the other rank{} waited {:.1f} ms per step at "
        "collectives{}",
        latest->rank, ms(latest->wait_s), ms(others_wait), job.ranks.size() > 2 ? "s" : "", ms(job.late_s),
        ms(job.noise_s), 100 * job.late_s / job.step_s, ms(job.step_s), job.ranks.size() > 2 ? "s" : "",
        ms(job.others_sync_s), fmt::format(" (rank {}: {:.1f} ms)", latest->rank, ms(latest->sync_s)));
  } else {
    job.text = fmt::format(
        "balanced: no rank's data wait stands out (rank {}'s, the largest, {:+.1f} ms ±{:.1f} per step against the "
        "others', needs {:.0f} sigma and {:.0f}% of the {:.1f} ms step)",
        latest->rank, ms(job.late_s), ms(job.noise_s), kSignificanceSigmas, kStragglerMinPct, ms(job.step_s));
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
  for (const auto& [label, r] : runs) {
    if (r.ranks.empty()) continue;
    std::vector<RankFigures> figures;
    for (const auto& one : r.ranks) {
      if (auto f = rank_figures(one.report, one.report_path)) figures.push_back(*f);
    }
    if (figures.empty()) continue;
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
    out += fmt::format(" rank {} {:.1f}/s wait {:.0f}% sync {} compute {:.0f}%;", r.value("rank", 0),
                       r.value("rate", 0.0), r.value("wait_pct", 0.0),
                       sync.is_number() ? fmt::format("{:.0f}%", sync.get<double>()) : std::string("n/a"),
                       r.value("compute_pct", 0.0));
  }
  out.back() = '\n';
  out += job.value("text", std::string()) + "\n";
  return out;
}

}  // namespace mlbench::stall
