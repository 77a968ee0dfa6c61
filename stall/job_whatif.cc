// The job's what-if (see job_whatif.h).
#include "job_whatif.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "analysis.h"
#include "core/html.h"
#include "decision.h"
#include "ranks.h"

namespace mlbench::stall {
namespace {

constexpr double kShare = 0.95;  // "keeps up": 95% of the best the table gives (as the cache's plateau)
const std::vector<double> kCachedShares{0, 0.25, 0.5, 0.75, 1};

double ms(double s) {
  return 1e3 * s;
}

const JobRank* find_rank(const JobRun& run, int rank) {
  for (const auto& r : run.ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

// The warm run a CPU count per rank is read from: that count's, else the largest below, else the
// smallest measured.
const JobRun* warm_run_for(const JobInputs& in, double c, int& c0) {
  if (in.warm.empty()) return nullptr;
  auto it = in.warm.upper_bound(static_cast<int>(std::floor(c + 1e-9)));
  if (it == in.warm.begin()) {
    c0 = it->first;
    return &it->second;
  }
  --it;
  c0 = it->first;
  return &it->second;
}

struct Corner {
  double g = 1, p = 1, s = 1;
};

JobPrediction predict_at(const JobInputs& in, double c, double x, double factor, const Corner& k) {
  JobPrediction out;
  int c0 = 0;
  const JobRun* warm = warm_run_for(in, c, c0);
  if (!warm || in.compute.ranks.empty()) return out;
  const double K = std::max(1, in.ranks);
  const double S = in.S * factor * k.s;
  const bool exact = std::abs(c - c0) < 1e-9;
  double slowest_s = -1, items = 0;
  for (const auto& g_rank : in.compute.ranks) {
    const JobRank* w_rank = find_rank(*warm, g_rank.rank);
    if (!w_rank) continue;
    const double g = g_rank.own_s * k.g;
    // The warm step at c: measured there, else prep scaled with the CPUs (num_workers = c).
    double w = w_rank->own_s * k.p;
    if (!exact) w = std::max(g, (in.workers > 0 ? w_rank->own_s : w_rank->wait_s) * k.p * c0 / c);
    w = std::max(w, g);
    const double b = w_rank->items;
    const double fetch = S > 0 && in.C > 0 ? b * ((1 - x) * K / S + x * K / in.C) : 0;
    const double fetch_warm = in.C > 0 ? b * K / in.C : 0;
    // The script's loader where measured; num_workers = c (fetch overlapped) where extrapolated.
    const bool overlapped = in.workers > 0 || !exact;
    const double own = overlapped ? std::max(w, fetch) : w + std::max(0.0, fetch - fetch_warm);
    items += b;
    if (own > slowest_s) {
      slowest_s = own;
      out.slowest = g_rank.rank;
      const bool fetch_binds = overlapped ? fetch > w : fetch - fetch_warm > w - g;
      out.bound = fetch_binds ? "fetch" : w > 1.05 * g ? "prep" : "compute";
    }
  }
  if (slowest_s <= 0) return out;
  const double T = slowest_s + warm->comm_s();
  out.rate = out.lo = out.hi = T > 0 ? items / T : 0;
  return out;
}

JobRun run_of(const std::string& label, const RunOutcome& r) {
  JobRun run;
  run.label = label;
  double slowest = 0;
  for (const RunOutcome& one : r.ranks) {
    const auto f = rank_figures(one.report, one.report_path);
    if (!f) continue;
    JobRank j;
    j.rank = f->rank;
    j.wait_s = f->wait_s;
    j.sync_s = f->sync_s;
    j.own_s = f->wait_s + f->compute_s;
    const auto& rep = one.report;
    if (rep.contains("batch_size") && rep["batch_size"].is_number() && rep["batch_size"].get<double>() > 0) {
      j.items = rep["batch_size"].get<double>();
    } else {
      j.items = f->rate * f->iteration_s;
    }
    if (rep.contains("cpu_split") && rep["cpu_split"].is_object() && rep["cpu_split"].contains("cpus") &&
        rep["cpu_split"]["cpus"].is_array()) {
      run.split = true;
      j.cpu_set = rep["cpu_split"]["cpus"].get<std::vector<int>>();
    } else if (rep.contains("machine") && rep["machine"].is_object() && rep["machine"].contains("affinity") &&
               rep["machine"]["affinity"].is_string()) {
      const std::string a = rep["machine"]["affinity"].get<std::string>();
      std::size_t at = 0;
      while (at < a.size()) {
        const std::size_t comma = a.find(',', at);
        const std::string one_cpu = a.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (!one_cpu.empty()) j.cpu_set.push_back(std::stoi(one_cpu));
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    }
    j.cpus = static_cast<int>(j.cpu_set.size());
    j.u =
        std::max(one.cv / std::sqrt(static_cast<double>(std::max(1, one.observations))), one.half_width.value_or(0.0));
    slowest = run.ranks.empty() ? f->rate : std::min(slowest, f->rate);
    run.ranks.push_back(j);
  }
  std::sort(run.ranks.begin(), run.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  run.measured = slowest * static_cast<double>(run.ranks.size());
  return run;
}

std::string gb(double v) {
  return v >= 10 ? fmt::format("{:.0f}", v) : v >= 1 ? fmt::format("{:.1f}", v) : fmt::format("{:.3g}", v);
}

std::string cpus_word(double c) {
  return fmt::format("{:g} CPU{}", c, std::abs(c - 1) < 1e-9 ? "" : "s");
}

}  // namespace

double JobRun::comm_s() const {
  if (ranks.empty()) return 0;
  double least = ranks.front().sync_s;
  for (const auto& r : ranks) least = std::min(least, r.sync_s);
  return std::max(0.0, least);
}

double JobRun::u() const {
  double u = 0;
  for (const auto& r : ranks) u = std::max(u, r.u);
  return u;
}

int ranks_per_node(const RunOutcome& run) {
  if (run.ranks.empty()) return 1;
  // By node: the rank block's node (srun's SLURMD_NODENAME) where it has one, else its host. The
  // private test cluster's two nodes are one host, "vm": by host its two ranks were one server's.
  std::map<std::string, int> by_node;
  for (const RunOutcome& r : run.ranks) {
    std::string node;
    if (r.report.contains("rank") && r.report["rank"].is_object()) {
      const nlohmann::json& b = r.report["rank"];
      for (const char* key : {"node", "host"}) {
        if (b.contains(key) && b[key].is_string()) {
          node = b[key].get<std::string>();
          break;
        }
      }
    }
    ++by_node[node];
  }
  int most = 1;
  for (const auto& [node, n] : by_node) most = std::max(most, n);
  return most;
}

std::string sweep_point_problem(int ranks, int cpus_per_rank, int cpus) {
  if (ranks * cpus_per_rank <= cpus) return "";
  return fmt::format("cpus-{}: not run: {} ranks x {} = {} CPUs, more than the {} CPUs here", cpus_per_rank, ranks,
                     cpus_word(cpus_per_rank), ranks * cpus_per_rank, cpus);
}

std::string split_cpus_per_rank(RunSpec& spec, int ranks, const std::vector<int>& affinity) {
  const int c = spec.cpus;
  if (auto why = sweep_point_problem(ranks, c, static_cast<int>(affinity.size())); !why.empty()) return why;
  std::string list;
  for (int i = 0; i < ranks * c; ++i) list += (list.empty() ? "" : ",") + std::to_string(affinity[i]);
  spec.cpus = ranks * c;
  spec.env["MLBENCH_PROBE_CPUS_PER_RANK"] = std::to_string(c);
  spec.env["MLBENCH_PROBE_JOB_CPUS"] = list;
  spec.env["MLBENCH_PROBE_RANKS_PER_NODE"] = std::to_string(ranks);
  return "";
}

JobPrediction job_predict(const JobInputs& in, double c, double x, double factor) {
  JobPrediction out = predict_at(in, c, x, factor, {});
  if (out.rate <= 0) return out;
  int c0 = 0;
  const JobRun* warm = warm_run_for(in, c, c0);
  const double u_g = in.compute.u(), u_p = warm ? warm->u() : 0, u_s = in.u_S;
  for (int mask = 0; mask < 8; ++mask) {
    const Corner k{1 + ((mask & 1) ? u_g : -u_g), 1 + ((mask & 2) ? u_p : -u_p), 1 + ((mask & 4) ? u_s : -u_s)};
    const double v = predict_at(in, c, x, factor, k).rate;
    if (v > 0 && std::isfinite(v)) out.lo = std::min(out.lo, v), out.hi = std::max(out.hi, v);
  }
  return out;
}

namespace {

// --rounds: the drift between a run's rounds, which its own observations do not see, widens each of
// its ranks' uncertainty (as the single-process what-if's rates are widened: rounds_uncertainty).
void widen_by_rounds(JobRun& run, const AnalysisContext& ctx) {
  const auto it = ctx.round_rates.find(run.label);
  if (it == ctx.round_rates.end()) return;
  const double drift = rounds_uncertainty(it->second);
  for (JobRank& j : run.ranks) j.u = std::max(j.u, drift);
}

}  // namespace

std::optional<JobWhatIfRuns> job_whatif_runs(const AnalysisContext& ctx,
                                             const std::map<std::string, RunOutcome>& runs) {
  const auto syn = runs.find("synthetic");
  if (syn == runs.end() || syn->second.ranks.size() < 2) return std::nullopt;
  JobWhatIfRuns out;
  JobInputs& in = out.inputs;
  in.ranks = 1;
  for (const auto& [label, r] : runs) in.ranks = std::max(in.ranks, ranks_per_node(r));
  in.cpus = std::max(1, ctx.cores_now);
  in.compute = run_of("synthetic", syn->second);
  in.compute.cached = 1;
  widen_by_rounds(in.compute, ctx);
  if (in.compute.ranks.size() < 2) return std::nullopt;
  if (const auto it = runs.find("cached"); it != runs.end() && !it->second.ranks.empty()) {
    in.workers = static_cast<int>(it->second.ranks.front().report.value("workers", 0));
  }
  for (const auto& [label, r] : runs) {
    if (r.ranks.empty() || label.rfind("cpus-", 0) != 0) continue;
    JobRun run = run_of(label, r);
    widen_by_rounds(run, ctx);
    try {
      run.cpus_per_rank = std::stoi(label.substr(5));
    } catch (const std::exception&) {
      continue;
    }
    out.sweep.push_back(run);
    if (run.split && run.cpus_per_rank >= 1) in.warm[static_cast<int>(run.cpus_per_rank)] = std::move(run);
  }
  const double share = static_cast<double>(in.cpus) / in.ranks;
  const auto cached = runs.find("cached");
  if (cached != runs.end() && !cached->second.ranks.empty()) {
    JobRun run = run_of("cached", cached->second);
    widen_by_rounds(run, ctx);
    run.cpus_per_rank = share;
    run.cached = 1;
    if (in.warm.empty()) {
      in.warm[std::max(1, static_cast<int>(share))] = std::move(run);
    } else {
      out.held_out.push_back(std::move(run));
    }
  }
  if (const auto cold = runs.find("cold"); cold != runs.end() && !cold->second.ranks.empty()) {
    JobRun run = run_of("cold", cold->second);
    run.cpus_per_rank = share;
    run.cached = 0;
    out.held_out.insert(out.held_out.begin(), std::move(run));
  }
  if (in.warm.empty()) return std::nullopt;
  for (int c : ctx.config.cpus) {
    if (auto why = sweep_point_problem(in.ranks, c, in.cpus); !why.empty()) out.skipped.push_back(why);
  }
  const auto rate = [&](const char* label) {
    const auto it = runs.find(label);
    return it == runs.end() ? 0.0 : it->second.rate;
  };
  in.S = rate("fetch-cold");
  in.C = rate("fetch-cached");
  if (const auto it = runs.find("fetch-cold"); it != runs.end()) {
    in.u_S = it->second.cv / std::sqrt(static_cast<double>(std::max(1, it->second.observations)));
  }
  in.dataset_gb = ctx.dataset_bytes / 1e9;
  in.mean_sample_bytes = ctx.items > 0 ? ctx.dataset_bytes / static_cast<double>(ctx.items) : 0;
  return out;
}

std::string smaller_share_straggler(const JobRun& run) {
  const JobRank* slowest = nullptr;
  for (const auto& r : run.ranks) {
    if (!slowest || r.own_s > slowest->own_s) slowest = &r;
  }
  if (!slowest || slowest->cpus <= 0 || run.ranks.size() < 2) return "";
  int others_most = 0;
  for (const auto& r : run.ranks) {
    if (&r != slowest) others_most = std::max(others_most, r.cpus);
  }
  if (slowest->cpus >= others_most) return "";
  // Its lateness must be more than noise: 2 standard errors of its own step.
  double others_step = 0;
  for (const auto& r : run.ranks) {
    if (&r != slowest) others_step = std::max(others_step, r.own_s);
  }
  if (slowest->own_s - others_step <= kSignificanceSigmas * slowest->u * slowest->own_s) return "";
  return fmt::format(
      "rank {} is the straggler because its share of the CPUs is smaller: {} against {} on another rank (the {} "
      "run: its own step {:.1f} ms against {:.1f} ms); give every rank as many (srun --cpus-per-task, or one "
      "affinity per rank)",
      slowest->rank, cpus_word(slowest->cpus), cpus_word(others_most), run.label, ms(slowest->own_s), ms(others_step));
}

nlohmann::json job_whatif_json(const JobWhatIfRuns& r) {
  const JobInputs& in = r.inputs;
  nlohmann::json out;
  const double share = static_cast<double>(in.cpus) / in.ranks;
  out["ranks_per_node"] = in.ranks;
  out["ranks"] = in.compute.ranks.size();
  out["cpus"] = in.cpus;
  out["cpus_per_rank_now"] = share;
  out["workers"] = in.workers;
  out["S"] = in.S;
  out["C"] = in.C;
  out["dataset_gb"] = in.dataset_gb;
  out["unit"] = "samples/s of the job";
  out["model"] =
      "per rank: its step at c CPUs per rank (the sweep; prep scaled with c between and beyond, num_workers = c), "
      "its fetch b ((1 - x) K / S + x K / C) overlapped with it (workers) or added (no workers); the job steps at "
      "its slowest rank plus the all-reduce's own time";
  nlohmann::json warm_from = nlohmann::json::array();
  for (const auto& [c, run] : in.warm)
    warm_from.push_back({{"cpus_per_rank", c}, {"run", run.label}, {"split", run.split}});
  out["from"] = {{"compute", "synthetic"},
                 {"warm", warm_from},
                 {"S", "fetch-cold (direct reads)"},
                 {"C", "fetch-cached (direct reads)"}};
  nlohmann::json sweep = nlohmann::json::array();
  for (const auto& run : r.sweep) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& j : run.ranks) {
      ranks.push_back({{"rank", j.rank},
                       {"cpus", j.cpu_set},
                       {"own_ms", ms(j.own_s)},
                       {"wait_ms", ms(j.wait_s)},
                       {"sync_ms", ms(j.sync_s)}});
    }
    sweep.push_back({{"run", run.label},
                     {"cpus_per_rank", run.cpus_per_rank},
                     {"split", run.split},
                     {"measured", run.measured},
                     {"ranks", ranks}});
  }
  out["sweep"] = sweep;
  out["skipped"] = r.skipped;
  // The table: CPUs per rank (measured, today's share, doublings) by DRAM.
  std::set<double> rows;
  double most = 1;
  for (const auto& [c, run] : in.warm) rows.insert(c), most = std::max(most, static_cast<double>(c));
  if (share >= 1) rows.insert(std::floor(share));
  for (double c = 1; c <= std::max(4.0, 2 * most); c *= 2) rows.insert(c);
  nlohmann::json dram = nlohmann::json::array();
  for (double x : kCachedShares) dram.push_back(x * in.dataset_gb);
  out["dram_gb"] = dram;
  out["cached"] = kCachedShares;
  nlohmann::json table = nlohmann::json::array();
  for (double c : rows) {
    nlohmann::json cells = nlohmann::json::array();
    for (double x : kCachedShares) {
      const JobPrediction p = job_predict(in, c, x);
      cells.push_back({{"dram_gb", x * in.dataset_gb},
                       {"cached", x},
                       {"rate", p.rate},
                       {"lo", p.lo},
                       {"hi", p.hi},
                       {"slowest_rank", p.slowest},
                       {"bound", p.bound}});
    }
    table.push_back({{"cpus_per_rank", c},
                     {"measured", in.warm.count(static_cast<int>(c)) > 0 && in.warm.at(static_cast<int>(c)).split},
                     {"cells", cells}});
  }
  out["table"] = table;
  // Held out: the runs the model did not use, and each sweep point from the others.
  nlohmann::json held = nlohmann::json::array();
  double worst = 0;
  bool passed = true;
  const auto check = [&](const JobInputs& model, const JobRun& run, const std::string& what) {
    const JobPrediction p = job_predict(model, run.cpus_per_rank, run.cached);
    if (!(p.rate > 0) || !(run.measured > 0)) return;
    const double err = 100 * (run.measured - p.rate) / p.rate;
    const bool within = std::abs(err) <= kSelfCheckThresholdPct || (run.measured >= p.lo && run.measured <= p.hi);
    passed = passed && within;
    worst = std::max(worst, std::abs(err));
    held.push_back({{"run", run.label},
                    {"what", what},
                    {"cpus_per_rank", run.cpus_per_rank},
                    {"split", run.split},
                    {"cached", run.cached},
                    {"measured", run.measured},
                    {"predicted", p.rate},
                    {"lo", p.lo},
                    {"hi", p.hi},
                    {"error_pct", err},
                    {"within", within}});
  };
  for (const auto& run : r.held_out) {
    check(in, run,
          run.cached == 0 ? "a cache state the model did not use (cold: every read from storage)"
                          : "the ranks sharing every CPU, unsplit (the model's warm steps are split)");
  }
  if (in.warm.size() >= 2) {
    for (const auto& [c, run] : in.warm) {
      JobInputs without = in;
      without.warm.erase(c);
      check(without, run, "a CPU count per rank the model did not use (predicted from the other sweep points)");
    }
  }
  out["held_out"] = held;
  out["max_error_pct"] = worst;
  out["self_check_passed"] = held.empty() ? nlohmann::json() : nlohmann::json(passed);
  // Advice in the script's terms: what the model predicts (CPUs per rank, DRAM, storage), and notes
  // that need no prediction (workers beyond a rank's CPUs, a straggler's smaller share).
  nlohmann::json advice = nlohmann::json::array();
  nlohmann::json notes = nlohmann::json::array();
  const double best = job_predict(in, *rows.rbegin(), 1).rate;
  double c_rec = *rows.rbegin();
  for (double c : rows) {
    if (job_predict(in, c, 1).rate >= kShare * best) {
      c_rec = c;
      break;
    }
  }
  out["cpus_per_rank_recommended"] = c_rec;
  const JobPrediction at_rec = job_predict(in, c_rec, 1);
  const JobPrediction now = job_predict(in, std::max(1.0, std::floor(share)), 1);
  const int workers_rec = static_cast<int>(c_rec);
  // No plateau within the table: the largest count still gains over the one below it.
  const bool open_ended = c_rec == *rows.rbegin() && rows.size() > 1 &&
                          at_rec.rate > 1.05 * job_predict(in, *std::next(rows.rbegin()), 1).rate;
  out["cpus_per_rank_open_ended"] = open_ended;
  if (c_rec > share) {
    advice.push_back(fmt::format(
        "more CPUs per rank: {}{} per rank, DataLoader(num_workers={}) in each rank; srun --cpus-per-task={} ({} "
        "CPUs for the {} ranks of a server like this one, which has {}): {:.1f} -> {:.1f} samples/s "
        "[{:.1f}-{:.1f}], the dataset cached{}",
        open_ended ? "at least " : "", cpus_word(c_rec), workers_rec, workers_rec, in.ranks * workers_rec, in.ranks,
        in.cpus, now.rate, at_rec.rate, at_rec.lo, at_rec.hi,
        in.warm.count(static_cast<int>(c_rec)) ? ""
        : open_ended ? " (predicted: prep scaled with the CPUs per rank beyond those measured, which still gains "
                       "at the table's largest count; measure on a server with more CPUs)"
                     : " (predicted: prep scaled with the CPUs per rank beyond those measured)"));
  } else {
    advice.push_back(fmt::format(
        "CPUs per rank: {} keep{} up ({:.1f} samples/s [{:.1f}-{:.1f}], the dataset cached): "
        "DataLoader(num_workers={}) per rank, srun --cpus-per-task={}; each of the {} ranks has {} of the {} CPUs, "
        "not all of them",
        cpus_word(c_rec), c_rec == 1 ? "s" : "", at_rec.rate, at_rec.lo, at_rec.hi, workers_rec, workers_rec, in.ranks,
        cpus_word(share), in.cpus));
  }
  if (in.workers > share) {
    notes.push_back(fmt::format("DataLoader(num_workers={}) per rank on {} each: {} ranks x {} workers share {} CPUs",
                                 in.workers, cpus_word(share), in.ranks, in.workers, in.cpus));
  }
  double x_rec = 1;
  for (double x : kCachedShares) {
    if (job_predict(in, c_rec, x).rate >= kShare * at_rec.rate) {
      x_rec = x;
      break;
    }
  }
  out["dram_gb_recommended"] = x_rec * in.dataset_gb;
  const JobPrediction cold_rec = job_predict(in, c_rec, 0);
  if (x_rec > 0) {
    const JobPrediction p = job_predict(in, c_rec, x_rec);
    advice.push_back(fmt::format(
        "DRAM: {} GB of page cache for the dataset on this server ({:.0f}% of its {} GB; the {} ranks share it, each "
        "reading its DistributedSampler shard): {:.1f} -> {:.1f} samples/s [{:.1f}-{:.1f}] at {} per rank",
        gb(x_rec * in.dataset_gb), 100 * x_rec, gb(in.dataset_gb), in.ranks, cold_rec.rate, p.rate, p.lo, p.hi,
        cpus_word(c_rec)));
    // Faster storage instead: the rate that reaches the same with nothing cached.
    double lo = 1, hi = 1024;
    if (job_predict(in, c_rec, 0, hi).rate >= kShare * at_rec.rate) {
      for (int i = 0; i < 40; ++i) {
        const double mid = std::sqrt(lo * hi);
        (job_predict(in, c_rec, 0, mid).rate >= kShare * at_rec.rate ? hi : lo) = mid;
      }
      const double s_new = hi * in.S;
      out["storage_needed"] = {
          {"samples_per_s", s_new}, {"MBps", s_new * in.mean_sample_bytes / 1e6}, {"now_samples_per_s", in.S}};
      advice.push_back(fmt::format(
          "faster storage: {:.0f} samples/s ({:.1f} MB/s) of random whole-file reads for the server's {} ranks "
          "together, against {:.0f} ({:.1f} MB/s) today, reaches {:.0f}% of the cached rate with nothing cached",
          s_new, s_new * in.mean_sample_bytes / 1e6, in.ranks, in.S, in.S * in.mean_sample_bytes / 1e6, 100 * kShare));
    }
  } else {
    advice.push_back(fmt::format("DRAM: fetch does not bind at {} per rank ({:.1f} samples/s with nothing cached)",
                                 cpus_word(c_rec), cold_rec.rate));
  }
  if (!out.contains("storage_needed")) out["storage_needed"] = nullptr;
  std::string share_note;
  for (const auto& run : r.held_out) {
    if (share_note.empty()) share_note = smaller_share_straggler(run);
  }
  for (const auto& run : r.sweep) {
    if (share_note.empty()) share_note = smaller_share_straggler(run);
  }
  out["straggler_cpu_share"] = share_note.empty() ? nlohmann::json() : nlohmann::json(share_note);
  if (!share_note.empty()) notes.push_back(share_note);
  // A model that missed a run it did not use advises nothing it predicts, as the single-process
  // what-if withholds its recommendation when its self-check fails (docs/stall.md, "CPUs per rank
  // and the job's what-if"); its table stays, with the held-out errors beside it.
  const bool withheld = !held.empty() && !passed;
  out["advice_withheld"] = withheld;
  if (withheld) {
    advice = nlohmann::json::array({fmt::format(
        "withheld: the job's what-if missed a run it did not use by {:.1f}% (more than {:.0f}% and outside its "
        "range), so its CPUs per rank, DRAM and storage are no advice here; --rounds 3 measures the drift between "
        "runs that one run per state cannot see",
        worst, kSelfCheckThresholdPct)});
  }
  for (auto& n : notes) advice.push_back(std::move(n));
  out["advice"] = advice;
  return out;
}

void add_job_whatif(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs, nlohmann::json& result) {
  if (!ctx.exec) return;  // --bench scaling --ranks K splits its ranks' CPUs itself (docs/stall.md)
  const auto r = job_whatif_runs(ctx, runs);
  if (!r) return;
  result["job_whatif"] = job_whatif_json(*r);
}

std::string job_whatif_text(const nlohmann::json& result) {
  if (!result.contains("job_whatif") || !result["job_whatif"].is_object()) return "";
  const auto& j = result["job_whatif"];
  std::string out = fmt::format(
      "\njob what-if: {} ranks on this server's {} CPUs, the job's samples/s by CPUs per rank (rows) and DRAM for "
      "the page cache, shared by the ranks (columns; the dataset is {} GB):\n  {:<10}",
      j.value("ranks_per_node", 0), j.value("cpus", 0), gb(j.value("dataset_gb", 0.0)), "CPUs/rank");
  for (const auto& d : j["dram_gb"]) out += fmt::format(" {:>22}", gb(d.get<double>()) + " GB");
  out += "\n";
  for (const auto& row : j["table"]) {
    out += fmt::format("  {:<10}", fmt::format("{:g}{}", row.value("cpus_per_rank", 0.0),
                                               row.value("measured", false) ? " (run)" : ""));
    for (const auto& cell : row["cells"]) {
      out += fmt::format(" {:>22}", fmt::format("{:.1f} [{:.1f}-{:.1f}]", cell.value("rate", 0.0),
                                                cell.value("lo", 0.0), cell.value("hi", 0.0)));
    }
    out += "\n";
  }
  for (const auto& s : j["skipped"]) out += "  " + s.get<std::string>() + "\n";
  for (const auto& h : j["held_out"]) {
    out += fmt::format(
        "job what-if held out: {} ({} per rank{}, {:.0f}% cached): measured {:.1f}/s, predicted "
        "{:.1f}/s [{:.1f}-{:.1f}] ({:+.1f}%{})\n",
        h.value("run", std::string()), cpus_word(h.value("cpus_per_rank", 0.0)),
        h.value("split", false) ? ", split" : ", unsplit", 100 * h.value("cached", 0.0), h.value("measured", 0.0),
        h.value("predicted", 0.0), h.value("lo", 0.0), h.value("hi", 0.0), h.value("error_pct", 0.0),
        h.value("within", false) ? "" : ", off");
  }
  const auto passed = j.value("self_check_passed", nlohmann::json());
  if (passed.is_boolean()) {
    out +=
        fmt::format("job what-if self-check {}: largest error {:.1f}% (a run is off when more than {:.0f}% and "
                    "outside its range)\n",
                    passed.get<bool>() ? "passed" : "FAILED", j.value("max_error_pct", 0.0), kSelfCheckThresholdPct);
  } else {
    out += "job what-if: not self-checked (no run held out)\n";
  }
  for (const auto& a : j["advice"]) out += "advice (job): " + a.get<std::string>() + "\n";
  return out;
}

std::string job_whatif_svg(const std::string& name, const nlohmann::json& j) {
  const double W = 560, H = 320, left = 60, right = 130, top = 30, bottom = 40;
  const double pw = W - left - right, ph = H - top - bottom;
  const double gb_max = std::max(1e-9, j.value("dataset_gb", 0.0));
  double ymax = 1;
  for (const auto& row : j["table"]) {
    for (const auto& cell : row["cells"]) ymax = std::max(ymax, cell.value("hi", 0.0));
  }
  for (const auto& h : j["held_out"]) ymax = std::max(ymax, h.value("measured", 0.0));
  ymax *= 1.1;
  const auto X = [&](double gbs) { return left + pw * gbs / gb_max; };
  const auto Y = [&](double y) { return top + ph * (1.0 - std::min(y, ymax) / ymax); };
  std::string out = fmt::format(
      R"svg(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" font-family="sans-serif" font-size="12">)svg"
      "\n<title>{} job what-if</title>\n"
      R"svg(<text x="{}" y="18" font-weight="bold">{}: the job's samples/s, {} ranks, by DRAM and CPUs per rank</text>)svg"
      "\n",
      W, H, W, H, core::html_escape(name), left, core::html_escape(name), j.value("ranks_per_node", 0));
  out += fmt::format(
      R"svg(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="black"/><line x1="{0}" y1="{2}" x2="{3}" y2="{2}" stroke="black"/>)svg"
      "\n",
      left, top, top + ph, left + pw);
  for (int i = 0; i <= 4; ++i) {
    const double v = ymax * i / 4;
    out += fmt::format(R"svg(<text x="{}" y="{:.1f}" text-anchor="end">{:.0f}</text>)svg"
                       "\n",
                       left - 4, Y(v) + 4, v);
    out += fmt::format(R"svg(<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>)svg"
                       "\n",
                       X(gb_max * i / 4), top + ph + 16, gb(gb_max * i / 4));
  }
  out += fmt::format(R"svg(<text x="{}" y="{}" text-anchor="middle">DRAM for the page cache (GB)</text>)svg"
                     "\n",
                     left + pw / 2, H - 6);
  const char* colors[] = {"#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#b279a2"};
  double ly = top + 10;
  int i = 0;
  for (const auto& row : j["table"]) {
    const char* color = colors[i++ % 6];
    std::string pts, band;
    for (const auto& cell : row["cells"]) {
      pts += fmt::format("{:.1f},{:.1f} ", X(cell.value("dram_gb", 0.0)), Y(cell.value("rate", 0.0)));
    }
    const double c = row.value("cpus_per_rank", 0.0);
    out += fmt::format(
        R"svg(<polyline class="curve" data-cpus-per-rank="{:g}" points="{}" fill="none" stroke="{}" stroke-width="2" stroke-dasharray="{}"/>)svg"
        "\n",
        c, pts, color, row.value("measured", false) ? "" : "5 3");
    out += fmt::format(
        R"svg(<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="{3}" stroke-width="2"/><text x="{4}" y="{5}">{6:g} CPU/rank</text>)svg"
        "\n",
        left + pw + 10, ly, left + pw + 30, color, left + pw + 34, ly + 4, c);
    ly += 18;
  }
  for (const auto& h : j["held_out"]) {
    out += fmt::format(
        R"svg(<circle class="measured" cx="{:.1f}" cy="{:.1f}" r="4" fill="white" stroke="black"><title>{} measured: {:.1f}/s</title></circle>)svg"
        "\n",
        X(h.value("cached", 0.0) * gb_max), Y(h.value("measured", 0.0)),
        core::html_escape(h.value("run", std::string())), h.value("measured", 0.0));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace mlbench::stall
