// mlbench-stall's measuring session (see session.h).
#include "session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "analyzer.h"
#include "charts.h"
#include "coordinated_model.h"
#include "core/credentials.h"
#include "core/progress.h"
#include "core/report.h"
#include "core/stall_record.h"
#include "core/statistics.h"
#include "core/sysinfo.h"
#include "exec_isolation.h"
#include "exec_target.h"
#include "job_whatif.h"
#include "pipeline/http_source.h"
#include "pipeline/loader.h"
#include "pipeline/remedies/peer_rate.h"
#include "sized_run.h"
#include "store/results_store.h"

namespace mlbench::stall {
namespace fs = std::filesystem;

namespace {

// Pairs of peer runs (peer-local, peer-N) for the CPU of a peer fetch.
constexpr int kPeerPairs = 3;

RawRates measure_raw(const std::vector<fs::path>& files, bool use_drop_caches) {
  RawRates raw;
  std::vector<std::size_t> order(files.size());
  std::iota(order.begin(), order.end(), 0);
  if (use_drop_caches) drop_caches();
  evict(files);
  raw.seq_cold = read_rate(files, order);
  std::shuffle(order.begin(), order.end(), std::mt19937(42));
  evict(files);
  raw.rand_cold = read_rate(files, order);
  warm(files);
  raw.cached = read_rate(files, order);
  raw.mean_file_bytes = static_cast<double>(raw.cached.bytes) / static_cast<double>(files.size());
  return raw;
}

// Requests at once of the bandwidth probe of a dataset over HTTP.
constexpr int kRemoteProbeDepth = 32;

// The probes' order of the objects: seeded, random.
std::vector<std::size_t> probe_order(const pipeline::HttpSource& source) {
  std::vector<std::size_t> order(source.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937(42));
  return order;
}

// The server's time for one request alone (L1): requests one after another, each timed, over the
// objects in `order`: at least 16 and about a second, at most 400. Their mean, and its standard
// error relative to it.
std::pair<double, double> one_at_a_time(const pipeline::HttpSource& source, const std::vector<std::size_t>& order) {
  std::vector<double> times;
  pipeline::Bytes buf;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t k = 0; k < 400; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    source.fetch(order[k % order.size()], buf);
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double>(t1 - t0).count());
    if (times.size() >= 16 && t1 - start > std::chrono::seconds(1)) break;
  }
  const double mean = core::mean(times);
  const double sd = core::sd_sample(times);
  return {mean, mean > 0 ? sd / std::sqrt(static_cast<double>(times.size())) / mean : 0};
}

// L1 again after the runs (with_end_probe).
void reprobe_remote(const pipeline::HttpSource& source, RemoteRates& r) {
  const auto [end, u_end] = one_at_a_time(source, probe_order(source));
  with_end_probe(r, end, u_end);
}

// A dataset over HTTP: the server's time for one request alone (L: requests one after another,
// each timed) and its bandwidth (B: kRemoteProbeDepth requests in flight, three times), over the
// objects in a seeded random order.
RemoteRates measure_remote(const pipeline::HttpSource& source) {
  RemoteRates r;
  r.mean_bytes = static_cast<double>(source.total_bytes()) / static_cast<double>(source.size());
  r.probe_depth = kRemoteProbeDepth;
  const std::vector<std::size_t> order = probe_order(source);
  std::tie(r.latency_s, r.u_latency) = one_at_a_time(source, order);
  r.probe_latency_s = r.latency_s;
  r.u_probe_latency = r.u_latency;
  // B: three probes of about a second each, the objects repeated as needed.
  std::vector<std::size_t> many;
  while (many.size() < 20000) many.insert(many.end(), order.begin(), order.end());
  std::vector<double> rates;
  for (int i = 0; i < 3; ++i) {
    std::rotate(many.begin(), many.begin() + static_cast<std::ptrdiff_t>(many.size() / 3), many.end());
    rates.push_back(pipeline::probe_fetch(source, many, kRemoteProbeDepth, 1.0).bytes_per_s());
  }
  const auto [lo, hi] = std::minmax_element(rates.begin(), rates.end());
  r.bandwidth_Bps = (rates[0] + rates[1] + rates[2]) / 3;
  r.u_bandwidth = r.bandwidth_Bps > 0 ? (*hi - *lo) / 2 / r.bandwidth_Bps : 0;
  return r;
}

class Session {
 public:
  Session(const StallOptions& o, std::vector<fs::path> files, std::shared_ptr<const pipeline::HttpSource> remote)
      : o_(o),
        out_(o.out_dir),
        files_(std::move(files)),
        remote_(std::move(remote)),
        all_cpus_(static_cast<int>(core::affinity_cpus().size())) {
    ctx_.config = o.config;
    ctx_.items = remote_ ? remote_->size() : files_.size();
    ctx_.cores_now = all_cpus_;
    ctx_.exec = o.exec_mode;
  }
  const fs::path& out() const { return out_; }
  void measure_storage();
  void run_plan();
  // Over HTTP: the one-at-a-time probe again, after the plan's runs (reprobe_remote).
  void reprobe_storage();
  void run_shared_jobs();
  void run_peer_pairs();
  void run_exec_loader();
  void write_analysis();
  // --exec: how its runs are isolated (before measure_storage), and the files they wrote, on the console.
  void isolate(std::shared_ptr<const IsolationPlan> plan) { isolation_ = std::move(plan); }
  void print_writes();

 private:
  void record_done(const std::string& label, const RunOutcome& r);
  void run_round(const RunSpec& spec, int round);
  DriftCheck drift() const;
  void run_shared(const std::vector<int>& ks, bool show_cpu, const char* without);
  void peer_pairs();

  const StallOptions& o_;
  const fs::path out_;
  const std::vector<fs::path> files_;                         // empty for a dataset over HTTP
  const std::shared_ptr<const pipeline::HttpSource> remote_;  // a dataset over HTTP, else null
  const int all_cpus_;
  AnalysisContext ctx_;
  RawRates raw_;
  std::unique_ptr<ProcessExecutor> executor_;
  std::map<std::string, RunOutcome> runs_;                   // the run the model reads, per label
  std::map<std::string, std::vector<RunOutcome>> by_round_;  // every round's outcome per label
  std::map<std::string, std::vector<RunSizing>> sizing_;     // how each round's run was sized, per label
  RoundsSizing rounds_;                                      // the rounds: --rounds, --max-rounds, made
  SizingBudget budget_;  // the plan's runs' extensions under the auto time limit (stall/run_sizing.h)
  nlohmann::json done_ = nlohmann::json::object();
  int depth_ = 0;  // batches the pipeline has ready before the timed loop (prefetch + workers)
  std::shared_ptr<const IsolationPlan> isolation_;  // --exec
  bool writes_printed_ = false;
};

void Session::reprobe_storage() {
  if (!remote_) return;
  reprobe_remote(*remote_, raw_.remote);
  if (raw_.remote.probe_latency_end_s > 0) {
    std::cout << fmt::format("storage (HTTP), again after the runs: {:.2f} ms a request alone ({:.2f} at the start)\n",
                             1e3 * raw_.remote.probe_latency_end_s, 1e3 * raw_.remote.probe_latency_start_s);
  }
}

// The dataset's read rates, and the network rate between nodes for the partitioned-cache
// what-if: a peer on loopback, as many fetching threads as the loader's default read-ahead,
// batched peer fetches.
void Session::measure_storage() {
  if (remote_) {
    raw_.remote = measure_remote(*remote_);
    const double mbps = raw_.remote.bandwidth_Bps / 1e6;
    raw_.seq_cold.mb_per_s = raw_.rand_cold.mb_per_s = raw_.cached.mb_per_s = mbps;
    raw_.mean_file_bytes = raw_.remote.mean_bytes;
    ctx_.dataset_bytes = static_cast<double>(remote_->total_bytes());
    std::cout << fmt::format("storage (HTTP): {:.2f} ms a request alone (L), {:.1f} MB/s with {} in flight (B)\n",
                             1e3 * raw_.remote.latency_s, mbps, raw_.remote.probe_depth);
    executor_ = std::make_unique<ProcessExecutor>(fs::path(o_.bench_dir) / o_.config.bench, out_, files_,
                                                  o_.use_drop_caches, o_.timeout_s);
    return;
  }
  raw_ = measure_raw(files_, o_.use_drop_caches);
  ctx_.dataset_bytes = raw_.mean_file_bytes * static_cast<double>(files_.size());
  std::cout << fmt::format("storage: {:.1f} MB/s sequential, {:.1f} MB/s random (cold); memory: {:.1f} MB/s\n",
                           raw_.seq_cold.mb_per_s, raw_.rand_cold.mb_per_s, raw_.cached.mb_per_s);
  try {
    const auto peer = pipeline::loopback_peer_rate(static_cast<std::size_t>(raw_.mean_file_bytes),
                                                   pipeline::kDefaultIoDepth, 0.5, pipeline::kLoopbackIdsPerRequest);
    raw_.peer_rate = peer.items_per_s;
    raw_.peer_cpu_s = peer.cpu_s_per_item;
    raw_.peer_ids_per_request = pipeline::kLoopbackIdsPerRequest;
    std::cout << fmt::format("peers (loopback): {:.0f} items/s ({:.1f} MB/s), {:.1f} us of CPU per item\n",
                             raw_.peer_rate, raw_.peer_rate * raw_.mean_file_bytes / 1e6, 1e6 * raw_.peer_cpu_s);
  } catch (const std::exception& e) {
    std::cerr << "mlbench-stall: warning: " << e.what() << "; no partitioned-cache what-if\n";
  }
  executor_ = std::make_unique<ProcessExecutor>(fs::path(o_.bench_dir) / o_.config.bench, out_, files_,
                                                o_.use_drop_caches, o_.timeout_s);
  if (o_.exec_mode) {
    executor_->run_commands(o_.exec);
    executor_->isolate(isolation_);
  }
}

void Session::print_writes() {
  if (!isolation_ || !executor_ || writes_printed_) return;
  writes_printed_ = true;
  std::cout << "\n" << executor_->writes().summary(*isolation_);
}

// Each run into runs.json as it ends: what is measured survives a later failure.
void Session::record_done(const std::string& label, const RunOutcome& r) {
  done_[label] = {{"rate", r.rate}, {"cv", r.cv}, {"report", r.report_path.string()}};
  core::write_json_atomic(out_ / "runs.json", done_);
}

// Round k > 1 of a run writes into OUT/runs/<label>-r<k>/, its extensions (a run measured until its
// noise is within --target-noise: stall/sized_run.h) into <label>[-r<k>]-ext<n>/.
void Session::run_round(const RunSpec& spec, int round) {
  RunSpec s = spec;
  if (round > 1) s.label = fmt::format("{}-r{}", spec.label, round);
  SizedOutcome sized = measure_sized(
      *executor_, s, o_.sizing,
      [&](const RunSpec& part, const RunOutcome& r) {
        std::cout << fmt::format("  {:<14} {:>10.1f} samples/s  (±{:.1f}%, {} cache {:.0f}% resident{}){}\n",
                                 part.label, r.rate, 100 * r.cv, to_string(spec.cache), 100 * r.before.fraction(),
                                 r.held ? ", held" : "", r.rate_from.empty() ? "" : "; the " + r.rate_from);
        record_done(part.label, r);
      },
      &budget_);
  std::cout << sizing_line(s.label, sized.sizing);
  sizing_[spec.label].push_back(sized.sizing);
  if (sized.sizing.target > 0) sized.outcome.half_width = sized.sizing.half_width;
  auto& all = by_round_[spec.label];
  all.push_back(std::move(sized.outcome));
  runs_[spec.label] = median_run(all);
}

// Whether the rounds so far drifted more than the effect the split measures (stall/run_sizing.h).
DriftCheck Session::drift() const {
  std::map<std::string, std::vector<double>> rates;
  for (const char* label : {"synthetic", "cached", "cold"}) {
    if (!by_round_.count(label)) continue;
    for (const RunOutcome& r : by_round_.at(label)) rates[label].push_back(r.rate);
  }
  const auto rate = [&](const char* label) { return runs_.count(label) ? runs_.at(label).rate : 0.0; };
  const auto effect = split_effect(rate("synthetic"), rate("cached"), rate("cold"), o_.sizing.target);
  if (!effect) return {};
  return check_drift(rates, *effect);
}

// The synthetic run first (its report gives the batch size and pipeline depth the plan needs),
// then the plan, round after round.
void Session::run_plan() {
  const StallConfig& config = o_.config;
  const auto first = o_.exec_mode ? plan_exec_runs(config, o_.exec).front() : plan_runs(config, ctx_.items, 1).front();
  rounds_.floor = o_.rounds;
  rounds_.most = std::max(o_.rounds, o_.max_rounds);
  if (o_.rounds > 1) std::cout << fmt::format("round 1 of {}\n", o_.rounds);
  run_round(first, 1);
  const core::InstanceReport first_report = runs_.at("synthetic").record();
  ctx_.batch_size = static_cast<int>(first_report.batch_size.value_or(1));
  if (first_report.pipeline) {
    const int workers = static_cast<int>(first_report.pipeline->workers.value_or(0));
    const int prefetch = static_cast<int>(first_report.pipeline->prefetch.value_or(0));
    depth_ = (prefetch > 0 ? prefetch : 2 * workers) + workers;
  }
  const auto plan =
      o_.exec_mode ? plan_exec_runs(config, o_.exec, depth_) : plan_runs(config, ctx_.items, ctx_.batch_size, depth_);
  core::ProgressPrinter progress(std::cout, core::is_terminal(1), static_cast<int>(plan.size()) * o_.rounds,
                                 "mlbench-stall");
  progress.update(1, std::nullopt, true);
  int made = 1;
  const int total = static_cast<int>(plan.size()) * o_.rounds;
  DriftCheck drifted;
  for (int round = 1; another_round(round - 1, rounds_.floor, rounds_.most, drifted); ++round) {
    if (round > o_.rounds) {
      // Beyond --rounds: the rounds drifted more than the split's effect (stall/run_sizing.h).
      rounds_.added.push_back(drifted);
      std::cout << fmt::format("round {} (added: {}'s rounds spread {:.1f}%, more than the {:.1f}% effect measured)\n",
                               round, drifted.label, 100 * drifted.spread, 100 * drifted.effect);
    } else if (round > 1) {
      std::cout << fmt::format("round {} of {}\n", round, o_.rounds);
    }
    for (std::size_t i = round == 1 ? 1 : 0; i < plan.size(); ++i) {
      if (plan[i].kind == "cpus" && o_.exec_mode &&
          (ranks_per_node(runs_.at("synthetic")) > 1 || runs_.at("synthetic").ranks.size() > 1)) {
        // A job of several ranks (per node, or one a node across nodes: srun's tasks take the CPUs
        // Slurm gives them, so only the probe in each task limits them): the sweep gives CPUs per
        // rank (stall/job_whatif.h).
        RunSpec spec = plan[i];
        const int k = ranks_per_node(runs_.at("synthetic"));
        if (const auto why = split_cpus_per_rank(spec, k, core::affinity_cpus()); !why.empty()) {
          if (round == 1) std::cout << "  " << why << "\n";
        } else {
          if (round == 1) {
            std::cout << fmt::format("  {}: {} CPU(s) per rank, {} rank{} on CPUs {}\n", spec.label, plan[i].cpus, k,
                                     k == 1 ? "" : "s",
                                     spec.env.at("MLBENCH_PROBE_JOB_CPUS"));
          }
          run_round(spec, round);
        }
      } else if (plan[i].kind != "page") {
        run_round(plan[i], round);
      } else {
        // The page-cache check is optional: a run that fails (the page cache could not be made to
        // hold the fraction, say) leaves the page-cache curve not self-checked.
        try {
          run_round(plan[i], round);
        } catch (const Interrupted&) {
          throw;
        } catch (const RunFailed& e) {
          std::cerr << "mlbench-stall: warning: " << e.what() << "; the page-cache what-if is not self-checked\n";
        }
      }
      progress.update(std::min(++made, total), std::nullopt, true);
    }
    rounds_.made = round;
    drifted = o_.sizing.target > 0 ? drift() : DriftCheck{};
  }
  progress.finish();
}

// K synthetic jobs at once for each K of `ks` (synthetic-x<K>), each run optional: a failure
// warns, ending with `without`, and the what-if goes on without it. `show_cpu`: the first
// job's CPU per sample beside its rate.
void Session::run_shared(const std::vector<int>& ks, bool show_cpu, const char* without) {
  for (const RunSpec& spec : plan_shared_device_runs(o_.config, ks)) {
    try {
      RunOutcome r = executor_->run(spec);
      const auto each = show_cpu && !r.nodes.empty() ? cpu_per_item_s(r.nodes.front()) : std::nullopt;
      std::cout << fmt::format("  {:<14} {:>10.1f} samples/s per job{}\n", spec.label, r.rate,
                               each ? fmt::format(", {:.0f} us of CPU a sample", 1e6 * *each) : "");
      record_done(spec.label, r);
      runs_[spec.label] = std::move(r);
    } catch (const RunFailed& e) {
      std::cerr << "mlbench-stall: warning: " << e.what() << "; " << without << "\n";
    }
  }
}

// On a device: what each of K jobs gets of it when K share it (the coordinated what-if's device
// ceiling; a failure leaves it at G x devices / K). On a CPU: what K jobs' steps at once, each on
// CPUs of its own, cost each other (the coordinated what-if's step CPU for K jobs), where the step
// is a real part of a sample's CPU (its compute keeps its CPUs busy and takes a tenth of a
// sample's CPU on one CPU or more); a failure leaves the step's CPU at one job's.
void Session::run_shared_jobs() {
  if (o_.exec_mode) return;
  const core::InstanceReport synthetic_report = runs_.at("synthetic").record();
  if (!synthetic_report.device.empty() && synthetic_report.device != "cpu") {
    std::cout << "device sharing: K synthetic jobs at once\n";
    run_shared(kCoordinatedJobs, false, "the coordinated what-if takes G x devices / K as a job's device ceiling");
    return;
  }
  if (!runs_.count("cpus-1") || !(runs_.at("cpus-1").rate > 0)) return;
  const auto& syn = runs_.at("synthetic");
  const int compute_cpus =
      std::max(1, std::min(static_cast<int>(synthetic_report.cpu_cores.value_or(all_cpus_)), all_cpus_));
  const auto& pc = synthetic_report.process_cpu;
  const double busy = pc ? pc->busy_cpus.value_or(0.0) : 0.0;
  const bool step_matters =
      syn.rate > 0 && compute_cpus / syn.rate >= 0.1 / runs_.at("cpus-1").rate && busy >= 0.5 * compute_cpus;
  const auto ks = shared_cpu_jobs(all_cpus_, compute_cpus, kCoordinatedJobs);
  if (step_matters && !ks.empty()) {
    std::cout << fmt::format("compute sharing: K synthetic jobs at once, {} CPU(s) each\n", compute_cpus);
    run_shared(ks, true, "the coordinated what-if takes one job's step CPU for K jobs");
  }
}

// The two kinds of peer run alternate, kPeerPairs times, so that a host whose speed drifts
// weighs on both alike; each kind's CPU per sample is the mean over all its nodes of all pairs.
void Session::peer_pairs() {
  std::map<std::string, std::vector<RunOutcome>> by_kind;
  for (int pair = 1; pair <= kPeerPairs; ++pair) {
    for (RunSpec spec : plan_peer_runs(o_.config, files_.size(), ctx_.batch_size, depth_)) {
      const std::string kind = spec.label;
      if (pair > 1) spec.label = fmt::format("{}-r{}", kind, pair);
      RunOutcome r = executor_->run(spec);
      const auto cpu = cpu_per_item_s(r);
      std::cout << fmt::format("  {:<14} {:>10.1f} samples/s per node, {} us of CPU a sample\n", spec.label, r.rate,
                               cpu ? fmt::format("{:.0f}", 1e6 * *cpu) : std::string("?"));
      record_done(spec.label, r);
      by_kind[kind].push_back(std::move(r));
    }
  }
  // Each kind as one run: every pair's nodes in turn, residency from its first and last run, the
  // wall time of all, held when every one was.
  for (auto& [kind, made] : by_kind) {
    std::vector<RunOutcome> nodes;
    double wall = 0;
    for (const RunOutcome& r : made) {
      nodes.insert(nodes.end(), r.nodes.begin(), r.nodes.end());
      wall += r.wall_s;
    }
    RunOutcome r = combine_nodes(std::move(nodes));
    r.spec = made.front().spec;
    r.spec.label = kind;
    r.before = made.front().before;
    r.after = made.back().after;
    r.wall_s = wall;
    r.held = std::all_of(made.begin(), made.end(), [](const RunOutcome& m) { return m.held; });
    runs_[kind] = std::move(r);
  }
}

// A peer fetch's CPU as nodes pay it (the partitioned what-if's k): two runs of --peer-nodes
// processes at once, for a benchmark that reads real files with a pipeline that has the
// partitioned cache (its report has pipeline.partitioned_cache), not an emulated storage.
// Optional: a failure leaves k to the loopback measurement.
void Session::run_peer_pairs() {
  const std::optional<core::PipelineInfo> cached_pipeline =
      runs_.count("cached") ? runs_.at("cached").record().pipeline : std::nullopt;
  const bool peer_capable = !o_.exec_mode && raw_.peer_rate > 0 && cached_pipeline &&
                            cached_pipeline->has_partitioned_cache_field && !cached_pipeline->root.empty() &&
                            !cached_pipeline->emulated_storage;
  if (!peer_capable || o_.config.peer_nodes < 2) return;
  const std::string too_big = peer_runs_memory_problem(
      o_.config.peer_nodes, static_cast<std::uint64_t>(raw_.mean_file_bytes * static_cast<double>(files_.size())),
      core::memory_available_bytes());
  if (!too_big.empty()) {
    std::cerr << "mlbench-stall: note: no peer runs: " << too_big
              << "; the partitioned what-if uses the loopback measurement of a peer fetch's CPU\n";
    raw_.peer_runs_note = "no peer runs: " + too_big;
    return;
  }
  std::cout << fmt::format("peer fetch CPU: {} nodes on loopback, each with the whole dataset, then 1/{} and peers\n",
                           o_.config.peer_nodes, o_.config.peer_nodes);
  try {
    peer_pairs();
  } catch (const Interrupted&) {
    throw;
  } catch (const RunFailed& e) {
    std::cerr << "mlbench-stall: warning: " << e.what()
              << "; the partitioned what-if uses the loopback measurement of a peer fetch's CPU\n";
    raw_.peer_runs_note = std::string("the peer runs failed: ") + e.what();
  }
}

// The alternative to the command's loader, measured: mlbench's own over the same files.
// Optional: without the loader benchmark, or when it fails, the advice names it unmeasured.
void Session::run_exec_loader() {
  if (!o_.exec_mode) return;
  const fs::path loader = fs::path(o_.bench_dir) / "loader";
  if (fs::exists(loader)) {
    try {
      ProcessExecutor loader_runs(loader, out_, files_, o_.use_drop_caches, o_.timeout_s);
      RunOutcome r = loader_runs.run(plan_exec_loader_run(o_.config, all_cpus_, ctx_.batch_size));
      std::cout << fmt::format("  {:<14} {:>10.1f} samples/s  (±{:.1f}%, mlbench's own loader, {} workers)\n",
                               "mlbench-loader", r.rate, 100 * r.cv, all_cpus_);
      record_done("mlbench-loader", r);
      runs_["mlbench-loader"] = std::move(r);
    } catch (const Interrupted&) {
      throw;
    } catch (const RunFailed& e) {
      std::cerr << "mlbench-stall: warning: " << e.what() << "; the advice names mlbench's loader unmeasured\n";
    }
  }
  // A command has no fetch-only mode: S and C are the dataset's direct read rates (one file a sample).
  const double mb = raw_.mean_file_bytes / 1e6;
  runs_["fetch-cold"] = direct_read_outcome(raw_.rand_cold.mb_per_s / mb, "direct reads, random order, cold");
  runs_["fetch-cached"] = direct_read_outcome(raw_.cached.mb_per_s / mb, "direct reads, page cache warm");
}

// The analysis of the runs: OUT/stall.json, split.svg, whatif.svg and the console summary.
void Session::write_analysis() {
  if (rounds_.made > 1) {
    for (const auto& [label, made] : by_round_) {
      for (const RunOutcome& r : made) ctx_.round_rates[label].push_back(r.rate);
    }
  }
  nlohmann::json result = analyze(ctx_, runs_, raw_);
  if (rounds_.made > 1) result["rounds"] = rounds_json(by_round_, rounds_.made);
  // How each run was sized (stall/sized_run.h): runs.<label>.sizing, and the analysis's in `sizing`.
  std::map<std::string, std::size_t> chosen;
  for (const auto& [label, made] : by_round_) {
    const RunOutcome* median = &median_run(made);
    chosen[label] = static_cast<std::size_t>(median - made.data());
    if (!result["runs"].contains(label)) continue;
    nlohmann::json& sizing = result["runs"][label]["sizing"] = label_sizing_json(sizing_[label], chosen[label]);
    // The rate and noise the model read, pooled over the chosen round's parts: --reanalyze reads them
    // here, its report being the first part's.
    const RunOutcome& r = runs_.at(label);
    if (sizing_[label].at(chosen[label]).parts > 1) {
      sizing["pooled"] = {{"rate", r.rate}, {"cv", r.cv}, {"observations", r.observations}};
    }
  }
  result["sizing"] = sizing_json(o_.sizing, rounds_, sizing_, chosen);
  if (o_.exec_mode) {
    result["exec"] = {{"command", o_.exec.command},
                      {"probe", (o_.exec.probe_dir / "mlbench_probe.py").string()},
                      {"cache_batches", o_.exec.cache_batches},
                      {"fetch_rates", "S and C from direct reads of the dataset's files (storage.S_raw, C_raw)"}};
    if (isolation_) result["exec"]["writes"] = executor_->writes().to_json(*isolation_);
  }
  core::write_json_atomic(out_ / "stall.json", result);
  const core::StallRecord record = core::parse_stall_record(result);
  const Split s{record.split.compute_pct, record.split.prep_pct, record.split.fetch_pct};
  core::write_file_atomic(out_ / "split.svg", split_svg(o_.config.bench, s));
  std::vector<CurvePoint> curve;
  const core::StallWhatIf whatif = record.whatif.value_or(core::StallWhatIf{});
  for (const auto& c : whatif.curve) curve.push_back({c.x, c.fetch.value_or(0), c.predicted.value_or(0)});
  std::vector<MeasuredPoint> measured;
  for (const auto& m : whatif.measured) measured.push_back({m.x, m.measured.value_or(0)});
  const core::StallRates rates = record.rates.value_or(core::StallRates{});
  core::write_file_atomic(out_ / "whatif.svg",
                          whatif_svg(o_.config.bench, curve, rates.P.value_or(0), rates.G.value_or(0), measured));
  if (result.contains("job_whatif")) {
    core::write_file_atomic(out_ / "job_whatif.svg", job_whatif_svg(o_.config.bench, result["job_whatif"]));
  }
  std::cout << "\n" << console_summary(result) << sizing_summary(result["sizing"]);
  print_writes();
  std::cout << "\nWrote " << (out_ / "stall.json").string() << "\n";
}

// The dataset's files (or its server's listing) and OUT, or 2 after the error line.
int prepare(const StallOptions& o, std::vector<fs::path>& files, std::shared_ptr<const pipeline::HttpSource>& remote) {
  if (remote_data(o.config)) {
    try {
      auto source = std::make_shared<pipeline::HttpSource>(o.config.data);
      remote = source;
    } catch (const std::exception& e) {
      std::cerr << "mlbench-stall: error: " << e.what() << "\n";
      return 2;
    }
  } else
    try {
      files = dataset_files(o.config.data);
    } catch (const std::exception& e) {
      std::cerr << "mlbench-stall: error: " << e.what()
                << " (generate one with: mlbench-datagen ensure fake-imagenet-small --root $DATA_DIRECTORY)\n";
      return 2;
    }
  const fs::path out(o.out_dir);
  std::error_code out_error;
  fs::create_directories(out / "runs", out_error);
  if (out_error) {
    std::error_code probe;
    const bool is_file = fs::exists(out, probe) && !fs::is_directory(out, probe);
    std::cerr << fmt::format("mlbench-stall: error: --out {}: {}\n", out.string(),
                             is_file ? "is a file, not a folder" : "cannot create it: " + out_error.message());
    return 2;
  }
  std::cout << fmt::format("mlbench-stall: {} on {} ({} {}), results in {}\n", o.config.bench, o.config.data,
                           remote ? remote->size() : files.size(), remote ? "objects" : "files", out.string());
  return 0;
}

}  // namespace

int run_session(const StallOptions& o) {
  std::vector<fs::path> files;
  std::shared_ptr<const pipeline::HttpSource> remote;
  if (const int rc = prepare(o, files, remote)) return rc;
  std::shared_ptr<const IsolationPlan> isolation;
  if (o.exec_mode) {
    // Before any measurement: an analysis that would let the command overwrite the user's files
    // does not start (stall/exec_isolation.h).
    PlannedIsolation planned = plan_isolation(o.exec.workdir, o.exec.writes_ok, o.out_dir);
    if (!planned.refusal.empty()) {
      std::cerr << "mlbench-stall: error: " << planned.refusal << "\n";
      return 2;
    }
    isolation = std::move(planned.plan);
    if (isolation->mode == Isolation::Overlay) {
      std::cout << fmt::format("the command runs in {} behind an overlay: what it writes there goes to {}\n",
                               isolation->cwd.string(), (isolation->out / "runs" / "<run>.writes" / "upper").string());
    } else if (isolation->mode == Isolation::Workdir) {
      std::cout << fmt::format("the command runs in {} (--exec-workdir)\n", isolation->cwd.string());
    }
  }
  Session session(o, std::move(files), std::move(remote));
  session.isolate(isolation);
  const fs::path runs_json = session.out() / "runs.json";
  try {
    session.measure_storage();
    session.run_plan();
    session.reprobe_storage();
    session.run_shared_jobs();
    session.run_peer_pairs();
    session.run_exec_loader();
    session.write_analysis();
    if (!o.store.empty()) {
      try {
        store::record_stall_file(o.store, session.out() / "stall.json");
        std::cout << "Recorded in the results store " << core::mask_credentials(o.store) << "\n";
      } catch (const std::exception& e) {
        std::cerr << "mlbench-stall: error: results store " << e.what() << " (the analysis is in "
                  << (session.out() / "stall.json").string() << ")\n";
        return 1;
      }
    }
  } catch (const Interrupted& e) {
    session.print_writes();
    std::cerr << "mlbench-stall: " << e.what() << " (runs done so far: " << runs_json.string() << ")\n";
    return 128 + e.signal();
  } catch (const std::exception& e) {
    session.print_writes();
    std::cerr << "mlbench-stall: error: " << e.what() << " (runs done so far: " << runs_json.string() << ")\n";
    return 1;
  }
  return 0;
}

}  // namespace mlbench::stall
