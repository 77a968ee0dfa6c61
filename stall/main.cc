// mlbench-stall: differential data-stall analysis of one benchmark on this
// machine (synthetic, cached and cold runs, storage and memory read rates, a
// CPU sweep, measured cache fractions), what-if prediction and recommendations.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <random>
#include <string_view>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "analyzer.h"
#include "charts.h"
#include "coordinated_model.h"
#include "core/cli.h"
#include "core/layout.h"
#include "core/progress.h"
#include "core/report.h"
#include "core/sysinfo.h"
#include "exec_target.h"
#include "pipeline/loader.h"
#include "pipeline/peer_rate.h"
#include "reanalysis.h"

namespace fs = std::filesystem;
using namespace mlbench;
using namespace mlbench::stall;

namespace {

// --reanalyze DIR: the analysis in DIR modelled again (stall/reanalysis.h), written to OUT.
int reanalyze_command(const fs::path& dir, const std::string& out_dir) {
  try {
    const nlohmann::json result = reanalyze(dir);
    const fs::path out = out_dir.empty() ? dir : fs::path(out_dir);
    fs::create_directories(out);
    if (out == dir) {
      const int was = result["reanalysis"]["schema_version"].get<int>();
      fs::rename(dir / "stall.json", dir / fmt::format("stall.v{}.json", was));
    }
    core::write_json_atomic(out / "stall.json", result);
    std::cout << console_summary(result) << "\nWrote " << (out / "stall.json").string() << " (" << dir.string()
              << "'s runs, modelled again)\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mlbench-stall: error: --reanalyze: " << e.what() << "\n";
    return 1;
  }
}

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

// python/ of the source tree (mlbench_probe.py): $MLBENCH_PYTHON_DIR, else the one the build
// was configured from, else next to the build folder.
fs::path python_dir() {
  return core::layout::python_dir();
}

}  // namespace

// Pairs of peer runs (peer-local, peer-N) for the CPU of a peer fetch.
constexpr int kPeerPairs = 3;

int main(int argc, char** argv) {
  CLI::App app(
      "mlbench-stall: where a benchmark's epoch time goes (compute, prep stall, fetch stall), "
      "what more DRAM or CPUs would change, and what to buy",
      "mlbench-stall");
  StallConfig config;
  std::string bench_dir = core::layout::benchmarks_dir().string();
  std::string out_dir;
  bool use_drop_caches = false;
  int timeout_s = 600;
  std::string data_directory = getenv("DATA_DIRECTORY") ? getenv("DATA_DIRECTORY") : "data";
  config.cpus = {};
  config.cache_fracs = {0, 0.25, 0.5, 0.75, 1};
  bool exec_mode = false;
  ExecConfig exec;
  app.add_option("--bench", config.bench, "Benchmark to analyse (an executable in --bench-dir; or --exec)");
  app.add_flag("--exec", exec_mode,
               "Analyse the command after -- instead of a benchmark: a training script whose DataLoader the "
               "probe times (python/mlbench_probe.py; docs/stall.md)");
  app.add_option("--probe-timeout", exec.probe_timeout_s,
                 "--exec: seconds a run may go without the probe's first report before it fails")
      ->check(core::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--cache-batches", exec.cache_batches, "--exec: batches the compute-only run loads and then replays")
      ->check(core::integer_in(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--bench-dir", bench_dir, "Where benchmark executables are")->capture_default_str();
  app.add_option("--data", config.data, "Dataset root (default: $DATA_DIRECTORY/fake-imagenet-small/train)");
  app.add_option("--cpus", config.cpus, "CPU counts of the prep sweep (default: 1 .. all)")->delimiter(',');
  auto* cache_fracs =
      app.add_option("--cache-fracs", config.cache_fracs, "Cache fractions to measure against the prediction")
          ->delimiter(',')
          ->check(core::number_in(0.0, 1.0))
          ->capture_default_str();
  auto* page_fracs =
      app.add_option("--page-fracs", config.page_fracs,
                     "Page-cache fractions, each made resident and held with --hold-page-cache, to check the "
                     "page-cache what-if against (0 < x < 1; 0: no such run)")
          ->delimiter(',')
          ->check(core::number_in(0.0, 1.0))
          ->capture_default_str();
  app.add_option("--iterations", config.iterations, "Timed iterations per run")
      ->check(core::integer_in(1, 1 << 24))
      ->capture_default_str();
  int rounds = 1;
  app.add_option("--rounds", rounds,
                 "Make every run N times, round after round, and use each run's median (a host whose speed drifts "
                 "over minutes: docs/stall.md)")
      ->check(core::integer_in(1, 100))
      ->capture_default_str();
  app.add_option("--out", out_dir, "Output directory (default: stall-<bench>)");
  std::string reanalyze_dir;
  app.add_option("--reanalyze", reanalyze_dir,
                 "Model a finished analysis in DIR again from its runs' reports, measuring nothing; writes "
                 "OUT/stall.json (default OUT: DIR, the old one kept as stall.v<schema>.json)");
  app.add_option("--node-cache", config.node_cache,
                 "Partitioned-cache what-if: each node's item cache as a fraction of the dataset (default: 1/N "
                 "for N nodes)")
      ->check(core::number_in(0.0, 1.0));
  app.add_flag("--nodes-share-cpus", config.nodes_share_cpus,
               "Partitioned-cache what-if: the N nodes share this machine's CPUs (a test on one machine), "
               "instead of as many CPUs each");
  app.add_option("--peer-nodes", config.peer_nodes,
                 "Partitioned-cache what-if: measure a peer fetch's CPU with this many benchmark processes on "
                 "loopback, with and without peers (0: only the back-to-back loopback measurement)")
      ->check(core::integer_in(0, 16))
      ->capture_default_str();
  app.add_flag("--drop-caches", use_drop_caches, "Also drop the whole page cache before cold runs (root)");
  app.add_option("--timeout", timeout_s, "Seconds before one run is killed")
      ->check(core::integer_at_least(1))
      ->capture_default_str();
  app.add_option("extra", config.extra, "Arguments after -- go to every benchmark run (with --exec: the command)");
  app.footer(
      "Writes OUT/stall.json, OUT/split.svg, OUT/whatif.svg and OUT/runs/ (every run's report and log).\n"
      "Exit status: 0 done, 1 a run or measurement failed (runs done so far stay in OUT), 2 bad usage,\n"
      "128 + signal when interrupted (Ctrl-C: the running benchmark is stopped with it).");
  // Everything after the first `--` is the runs' (or --exec's command's) and never parsed here:
  // CLI11 takes a `--` right after a list option (--cpus 1,2 --) as that list's end and would
  // then parse the command's own flags as mlbench-stall's.
  int own_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      own_argc = i;
      break;
    }
  }
  app.set_version_flag("--version", mlbench::core::layout::version_line("mlbench-stall"),
                       "The version and the commit it was built from");
  try {
    app.parse(own_argc, argv);
    for (int i = own_argc + 1; i < argc; ++i) config.extra.emplace_back(argv[i]);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "mlbench-stall: error: " << core::parse_error_line(e) << " (see --help)\n";
    return 2;
  }
  if (!reanalyze_dir.empty()) return reanalyze_command(reanalyze_dir, out_dir);
  if (config.peer_nodes == 1) {
    std::cerr << "mlbench-stall: error: --peer-nodes 1: peers need two nodes or more (0 turns the peer runs off)\n";
    return 2;
  }
  if (exec_mode) {
    exec.command = config.extra;
    config.extra.clear();
    if (exec.command.empty()) {
      std::cerr << "mlbench-stall: error: --exec needs the command after --, e.g. mlbench-stall --exec --data DIR -- "
                   "/usr/bin/python3 train.py\n";
      return 2;
    }
    if (!config.bench.empty()) {
      std::cerr
          << "mlbench-stall: error: --bench and --exec exclude each other: --exec analyses the command after --\n";
      return 2;
    }
    if (cache_fracs->count() > 0) {
      std::cerr << "mlbench-stall: error: --cache-fracs needs mlbench's item cache (--bench); a command run with "
                   "--exec has none to size, so its what-if is predicted, not measured\n";
      return 2;
    }
    if (page_fracs->count() > 0) {
      std::cerr << "mlbench-stall: error: --page-fracs needs a benchmark that holds the page cache "
                   "(--hold-page-cache, --bench); a command run with --exec cannot be made to\n";
      return 2;
    }
    config.cache_fracs.clear();
    config.page_fracs.clear();
    const std::string found = find_executable(exec.command.front(), core::getenv_or("PATH", "/usr/bin:/bin"));
    const std::string problem = found.empty() ? "not found on PATH" : executable_problem(found);
    if (!problem.empty()) {
      std::cerr << fmt::format("mlbench-stall: error: cannot execute '{}': {}\n", exec.command.front(), problem);
      return 2;
    }
    exec.python_dir = python_dir();
    if (!fs::exists(exec.python_dir / "mlbench_probe.py")) {
      std::cerr << fmt::format(
          "mlbench-stall: error: the probe is not at {} (set MLBENCH_PYTHON_DIR to the "
          "repository's python/ folder)\n",
          (exec.python_dir / "mlbench_probe.py").string());
      return 2;
    }
    config.bench = "exec";
  } else if (config.bench.empty()) {
    std::cerr << "mlbench-stall: error: --bench is required (or --exec -- COMMAND) (see --help)\n";
    return 2;
  }
  const fs::path bench = fs::path(bench_dir) / config.bench;
  if (!exec_mode && !fs::exists(bench)) {
    std::cerr << fmt::format("mlbench-stall: error: unknown benchmark '{}': no executable {}\n", config.bench,
                             bench.string());
    return 2;
  }
  if (config.data.empty()) config.data = (fs::path(data_directory) / "fake-imagenet-small" / "train").string();
  if (out_dir.empty()) out_dir = "stall-" + config.bench;
  const int all_cpus = static_cast<int>(core::affinity_cpus().size());
  if (config.cpus.empty()) {
    for (int n = 1; n <= all_cpus; n *= 2) config.cpus.push_back(n);
    if (config.cpus.back() != all_cpus) config.cpus.push_back(all_cpus);
  }
  for (int n : config.cpus) {
    if (n < 1 || n > all_cpus) {
      std::cerr << fmt::format("mlbench-stall: error: --cpus {} is outside 1..{} (the CPUs this process may use)\n", n,
                               all_cpus);
      return 2;
    }
  }
  std::vector<fs::path> files;
  try {
    files = dataset_files(config.data);
  } catch (const std::exception& e) {
    std::cerr << "mlbench-stall: error: " << e.what()
              << " (generate one with: mlbench-datagen ensure fake-imagenet-small --root $DATA_DIRECTORY)\n";
    return 2;
  }

  const fs::path out(out_dir);
  std::error_code out_error;
  fs::create_directories(out / "runs", out_error);
  if (out_error) {
    std::error_code probe;
    const bool is_file = fs::exists(out, probe) && !fs::is_directory(out, probe);
    std::cerr << fmt::format("mlbench-stall: error: --out {}: {}\n", out.string(),
                             is_file ? "is a file, not a folder" : "cannot create it: " + out_error.message());
    return 2;
  }
  std::cout << fmt::format("mlbench-stall: {} on {} ({} files), results in {}\n", config.bench, config.data,
                           files.size(), out.string());
  std::map<std::string, RunOutcome> runs;
  AnalysisContext ctx;
  ctx.config = config;
  ctx.items = files.size();
  ctx.cores_now = all_cpus;
  ctx.exec = exec_mode;
  try {
    RawRates raw = measure_raw(files, use_drop_caches);
    ctx.dataset_bytes = raw.mean_file_bytes * static_cast<double>(files.size());
    std::cout << fmt::format("storage: {:.1f} MB/s sequential, {:.1f} MB/s random (cold); memory: {:.1f} MB/s\n",
                             raw.seq_cold.mb_per_s, raw.rand_cold.mb_per_s, raw.cached.mb_per_s);
    // The network rate between nodes for the partitioned-cache what-if: a peer on loopback,
    // as many fetching threads as the loader's default read-ahead, batched peer fetches.
    try {
      const auto peer = pipeline::loopback_peer_rate(static_cast<std::size_t>(raw.mean_file_bytes),
                                                     pipeline::kDefaultIoDepth, 0.5, pipeline::kLoopbackIdsPerRequest);
      raw.peer_rate = peer.items_per_s;
      raw.peer_cpu_s = peer.cpu_s_per_item;
      raw.peer_ids_per_request = pipeline::kLoopbackIdsPerRequest;
      std::cout << fmt::format("peers (loopback): {:.0f} items/s ({:.1f} MB/s), {:.1f} us of CPU per item\n",
                               raw.peer_rate, raw.peer_rate * raw.mean_file_bytes / 1e6, 1e6 * raw.peer_cpu_s);
    } catch (const std::exception& e) {
      std::cerr << "mlbench-stall: warning: " << e.what() << "; no partitioned-cache what-if\n";
    }
    ProcessExecutor executor(bench, out, files, use_drop_caches, timeout_s);
    if (exec_mode) executor.run_commands(exec);
    // The synthetic run first: its report gives the batch size the plan needs.
    const auto first = exec_mode ? plan_exec_runs(config, exec).front() : plan_runs(config, files.size(), 1).front();
    std::unique_ptr<core::ProgressPrinter> progress;
    // Every round's outcome per label; runs (above) holds the one the model reads.
    std::map<std::string, std::vector<RunOutcome>> by_round;
    nlohmann::json done = nlohmann::json::object();
    // Each run into runs.json as it ends: what is measured survives a later failure.
    const auto record_done = [&](const std::string& label, const RunOutcome& r) {
      done[label] = {{"rate", r.rate}, {"cv", r.cv}, {"report", r.report_path.string()}};
      core::write_json_atomic(out / "runs.json", done);
    };
    // Round k > 1 of a run writes into OUT/runs/<label>-r<k>/.
    const auto run_round = [&](const RunSpec& spec, int round) {
      RunSpec s = spec;
      if (round > 1) s.label = fmt::format("{}-r{}", spec.label, round);
      RunOutcome r = executor.run(s);
      std::cout << fmt::format("  {:<14} {:>10.1f} samples/s  (±{:.1f}%, {} cache {:.0f}% resident{}){}\n", s.label,
                               r.rate, 100 * r.cv, to_string(spec.cache), 100 * r.before.fraction(),
                               r.held ? ", held" : "", r.rate_from.empty() ? "" : "; the " + r.rate_from);
      record_done(s.label, r);
      auto& all = by_round[spec.label];
      all.push_back(std::move(r));
      runs[spec.label] = median_run(all);
    };
    if (rounds > 1) std::cout << fmt::format("round 1 of {}\n", rounds);
    run_round(first, 1);
    const nlohmann::json& first_report = runs.at("synthetic").report;
    ctx.batch_size = first_report.value("batch_size", 1);
    int depth = 0;
    if (first_report["pipeline"].is_object()) {
      const int workers = first_report["pipeline"].value("workers", 0);
      const int prefetch = first_report["pipeline"].value("prefetch", 0);
      depth = (prefetch > 0 ? prefetch : 2 * workers) + workers;
    }
    const auto plan =
        exec_mode ? plan_exec_runs(config, exec, depth) : plan_runs(config, files.size(), ctx.batch_size, depth);
    const int total = static_cast<int>(plan.size()) * rounds;
    progress = std::make_unique<core::ProgressPrinter>(std::cout, core::is_terminal(1), total, "mlbench-stall");
    progress->update(1, std::nullopt, true);
    int made = 1;
    for (int round = 1; round <= rounds; ++round) {
      if (round > 1) std::cout << fmt::format("round {} of {}\n", round, rounds);
      for (std::size_t i = round == 1 ? 1 : 0; i < plan.size(); ++i) {
        if (plan[i].kind != "page") {
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
        progress->update(++made, std::nullopt, true);
      }
    }
    progress->finish();
    // K synthetic jobs at once for each K of `ks` (synthetic-x<K>), each run optional: a failure
    // warns, ending with `without`, and the what-if goes on without it. `show_cpu`: the first
    // job's CPU per sample beside its rate.
    const auto run_shared = [&](const std::vector<int>& ks, bool show_cpu, const char* without) {
      for (const RunSpec& spec : plan_shared_device_runs(config, ks)) {
        try {
          RunOutcome r = executor.run(spec);
          const auto each = show_cpu && !r.nodes.empty() ? cpu_per_item_s(r.nodes.front()) : std::nullopt;
          std::cout << fmt::format("  {:<14} {:>10.1f} samples/s per job{}\n", spec.label, r.rate,
                                   each ? fmt::format(", {:.0f} us of CPU a sample", 1e6 * *each) : "");
          record_done(spec.label, r);
          runs[spec.label] = std::move(r);
        } catch (const RunFailed& e) {
          std::cerr << "mlbench-stall: warning: " << e.what() << "; " << without << "\n";
        }
      }
    };
    // On a device: what each of K jobs gets of it when K share it (the coordinated what-if's
    // device ceiling). Optional: a failure leaves the ceiling at G x devices / K.
    if (!exec_mode && runs.at("synthetic").report.value("device", "cpu") != "cpu") {
      std::cout << "device sharing: K synthetic jobs at once\n";
      run_shared(kCoordinatedJobs, false, "the coordinated what-if takes G x devices / K as a job's device ceiling");
    }
    // On a CPU: what K jobs' steps at once, each on CPUs of its own, cost each other (the
    // coordinated what-if's step CPU for K jobs), where the step is a real part of a sample's CPU
    // (its compute keeps its CPUs busy and takes a tenth of a sample's CPU on one CPU or more).
    // Optional: a failure leaves the step's CPU at one job's.
    else if (!exec_mode && runs.count("cpus-1") && runs.at("cpus-1").rate > 0) {
      const auto& syn = runs.at("synthetic");
      const int compute_cpus = std::max(1, std::min(syn.report.value("cpu_cores", all_cpus), all_cpus));
      const auto& pc = syn.report.value("process_cpu", nlohmann::json());
      const double busy = pc.is_object() ? pc.value("busy_cpus", 0.0) : 0.0;
      const bool step_matters =
          syn.rate > 0 && compute_cpus / syn.rate >= 0.1 / runs.at("cpus-1").rate && busy >= 0.5 * compute_cpus;
      const auto ks = shared_cpu_jobs(all_cpus, compute_cpus, kCoordinatedJobs);
      if (step_matters && !ks.empty()) {
        std::cout << fmt::format("compute sharing: K synthetic jobs at once, {} CPU(s) each\n", compute_cpus);
        run_shared(ks, true, "the coordinated what-if takes one job's step CPU for K jobs");
      }
    }
    // A peer fetch's CPU as nodes pay it (the partitioned what-if's k): two runs of
    // --peer-nodes processes at once, for a benchmark that reads real files with a pipeline
    // that has the partitioned cache (its report has pipeline.partitioned_cache), not an
    // emulated storage. Optional: a failure leaves k to the loopback measurement.
    const nlohmann::json& cached_pipeline =
        runs.count("cached") ? runs.at("cached").report.value("pipeline", nlohmann::json()) : nlohmann::json();
    const bool peer_capable = !exec_mode && raw.peer_rate > 0 && cached_pipeline.is_object() &&
                              cached_pipeline.contains("partitioned_cache") && cached_pipeline.contains("root") &&
                              !cached_pipeline.contains("emulated_storage");
    if (peer_capable && config.peer_nodes >= 2) {
      const std::string too_big = peer_runs_memory_problem(
          config.peer_nodes, static_cast<std::uint64_t>(raw.mean_file_bytes * static_cast<double>(files.size())),
          core::memory_available_bytes());
      if (!too_big.empty()) {
        std::cerr << "mlbench-stall: note: no peer runs: " << too_big
                  << "; the partitioned what-if uses the loopback measurement of a peer fetch's CPU\n";
        raw.peer_runs_note = "no peer runs: " + too_big;
      } else {
        std::cout << fmt::format(
            "peer fetch CPU: {} nodes on loopback, each with the whole dataset, then 1/{} and peers\n",
            config.peer_nodes, config.peer_nodes);
        try {
          // The two kinds alternate, kPeerPairs times, so that a host whose speed drifts weighs on
          // both alike; each kind's CPU per sample is the mean over all its nodes of all pairs.
          std::map<std::string, std::vector<RunOutcome>> by_kind;
          for (int pair = 1; pair <= kPeerPairs; ++pair) {
            for (RunSpec spec : plan_peer_runs(config, files.size(), ctx.batch_size, depth)) {
              const std::string kind = spec.label;
              if (pair > 1) spec.label = fmt::format("{}-r{}", kind, pair);
              RunOutcome r = executor.run(spec);
              const auto cpu = cpu_per_item_s(r);
              std::cout << fmt::format("  {:<14} {:>10.1f} samples/s per node, {} us of CPU a sample\n", spec.label,
                                       r.rate, cpu ? fmt::format("{:.0f}", 1e6 * *cpu) : std::string("?"));
              record_done(spec.label, r);
              by_kind[kind].push_back(std::move(r));
            }
          }
          // Each kind as one run: every pair's nodes in turn, residency from its first and last
          // run, the wall time of all, held when every one was.
          for (auto& [kind, made] : by_kind) {
            std::vector<RunOutcome> nodes;
            double wall = 0;
            for (const RunOutcome& r : made) {
              nodes.insert(nodes.end(), r.nodes.begin(), r.nodes.end());
              wall += r.wall_s;
            }
            RunOutcome r = combine_nodes(std::move(nodes));
            r.before = made.front().before;
            r.after = made.back().after;
            r.wall_s = wall;
            r.held = std::all_of(made.begin(), made.end(), [](const RunOutcome& m) { return m.held; });
            runs[kind] = std::move(r);
          }
        } catch (const Interrupted&) {
          throw;
        } catch (const RunFailed& e) {
          std::cerr << "mlbench-stall: warning: " << e.what()
                    << "; the partitioned what-if uses the loopback measurement of a peer fetch's CPU\n";
          raw.peer_runs_note = std::string("the peer runs failed: ") + e.what();
        }
      }
    }
    // The alternative to the command's loader, measured: mlbench's own over the same files.
    // Optional: without the loader benchmark, or when it fails, the advice names it unmeasured.
    if (exec_mode && fs::exists(fs::path(bench_dir) / "loader")) {
      try {
        ProcessExecutor loader_runs(fs::path(bench_dir) / "loader", out, files, use_drop_caches, timeout_s);
        RunOutcome r = loader_runs.run(plan_exec_loader_run(config, all_cpus, ctx.batch_size));
        std::cout << fmt::format("  {:<14} {:>10.1f} samples/s  (±{:.1f}%, mlbench's own loader, {} workers)\n",
                                 "mlbench-loader", r.rate, 100 * r.cv, all_cpus);
        record_done("mlbench-loader", r);
        runs["mlbench-loader"] = std::move(r);
      } catch (const Interrupted&) {
        throw;
      } catch (const RunFailed& e) {
        std::cerr << "mlbench-stall: warning: " << e.what() << "; the advice names mlbench's loader unmeasured\n";
      }
    }
    if (exec_mode) {
      // A command has no fetch-only mode: S and C are the dataset's direct read rates (one file a sample).
      const double mb = raw.mean_file_bytes / 1e6;
      runs["fetch-cold"] = direct_read_outcome(raw.rand_cold.mb_per_s / mb, "direct reads, random order, cold");
      runs["fetch-cached"] = direct_read_outcome(raw.cached.mb_per_s / mb, "direct reads, page cache warm");
    }
    if (rounds > 1) {
      for (const auto& [label, made] : by_round) {
        for (const RunOutcome& r : made) ctx.round_rates[label].push_back(r.rate);
      }
    }
    nlohmann::json result = analyze(ctx, runs, raw);
    if (rounds > 1) result["rounds"] = rounds_json(by_round, rounds);
    if (exec_mode) {
      result["exec"] = {{"command", exec.command},
                        {"probe", (exec.python_dir / "mlbench_probe.py").string()},
                        {"cache_batches", exec.cache_batches},
                        {"fetch_rates", "S and C from direct reads of the dataset's files (storage.S_raw, C_raw)"}};
    }
    core::write_json_atomic(out / "stall.json", result);
    const Split s{result["split"]["compute_pct"], result["split"]["prep_pct"], result["split"]["fetch_pct"]};
    core::write_file_atomic(out / "split.svg", split_svg(config.bench, s));
    std::vector<CurvePoint> curve;
    for (const auto& c : result["whatif"]["curve"]) curve.push_back({c["x"], c["fetch"], c["predicted"]});
    std::vector<MeasuredPoint> measured;
    for (const auto& m : result["whatif"]["measured"]) measured.push_back({m["x"], m["measured"]});
    core::write_file_atomic(out / "whatif.svg",
                            whatif_svg(config.bench, curve, result["rates"]["P"], result["rates"]["G"], measured));
    std::cout << "\n" << console_summary(result) << "\nWrote " << (out / "stall.json").string() << "\n";
  } catch (const Interrupted& e) {
    std::cerr << "mlbench-stall: " << e.what() << " (runs done so far: " << (out / "runs.json").string() << ")\n";
    return 128 + e.signal();
  } catch (const std::exception& e) {
    std::cerr << "mlbench-stall: error: " << e.what() << " (runs done so far: " << (out / "runs.json").string()
              << ")\n";
    return 1;
  }
  return 0;
}
