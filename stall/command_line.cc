// mlbench-stall's command line (see command_line.h).
#include "command_line.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string_view>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/cli.h"
#include "core/layout.h"
#include "core/sysinfo.h"
#include "pipeline/shards.h"

namespace mlbench::stall {
namespace fs = std::filesystem;

namespace {

// The what-if models' options (the partitioned cache), the runs' limits and the arguments after --.
void add_model_and_run_options(CLI::App& app, StallOptions& o) {
  app.add_option("--node-cache", o.config.node_cache,
                 "Partitioned-cache what-if: each node's item cache as a fraction of the dataset (default: 1/N "
                 "for N nodes)")
      ->check(core::number_in(0.0, 1.0));
  app.add_flag("--nodes-share-cpus", o.config.nodes_share_cpus,
               "Partitioned-cache what-if: the N nodes share this machine's CPUs (a test on one machine), "
               "instead of as many CPUs each");
  app.add_option("--peer-nodes", o.config.peer_nodes,
                 "Partitioned-cache what-if: measure a peer fetch's CPU with this many benchmark processes on "
                 "loopback, with and without peers (0: only the back-to-back loopback measurement)")
      ->check(core::integer_in(0, 16))
      ->capture_default_str();
  app.add_flag("--drop-caches", o.use_drop_caches, "Also drop the whole page cache before cold runs (root)");
  app.add_option("--timeout", o.timeout_s, "Seconds before one run is killed")
      ->check(core::integer_at_least(1))
      ->capture_default_str();
  app.add_option("extra", o.config.extra, "Arguments after -- go to every benchmark run (with --exec: the command)");
  app.footer(
      "Writes OUT/stall.json, OUT/split.svg, OUT/whatif.svg and OUT/runs/ (every run's report and log).\n"
      "Exit status: 0 done, 1 a run or measurement failed (runs done so far stay in OUT), 2 bad usage,\n"
      "128 + signal when interrupted (Ctrl-C: the running benchmark is stopped with it).");
}

// How long each run measures (docs/stall.md, "How runs are sized"); --target-noise is read in percent
// and kept as a fraction (parse_command_line).
void add_sizing_options(CLI::App& app, StallOptions& o) {
  app.add_option("--target-noise", o.sizing.target,
                 "Measure each run until its rate's 95% interval is within +-PCT% (0: fixed sizing, every run as "
                 "--iterations says)")
      ->check(core::number_in(0.0, 100.0))
      ->default_val(2.0)
      ->capture_default_str();
  app.add_option("--max-run-time", o.sizing.max_run_s,
                 "Seconds one run may measure in all, extensions included, before its noise is stated as reached "
                 "(default 0: the analysis's runs share half their first parts' time, at most 1.5x in all)")
      ->check(core::number_in(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--max-rounds", o.max_rounds,
                 "Rounds at most when the rounds drift more than the split's effect (default: --rounds + 2 from "
                 "--rounds 2; --rounds is the floor)")
      ->check(core::integer_in(0, 100));
}

}  // namespace

ParsedCommandLine parse_command_line(int argc, char** argv) {
  CLI::App app(
      "mlbench-stall: where a benchmark's epoch time goes (compute, prep stall, fetch stall), "
      "what more DRAM or CPUs would change, and what to buy",
      "mlbench-stall");
  ParsedCommandLine parsed;
  StallOptions& o = parsed.options;
  o.bench_dir = core::layout::benchmarks_dir().string();
  o.data_directory = getenv("DATA_DIRECTORY") ? getenv("DATA_DIRECTORY") : "data";
  o.config.cpus = {};
  o.config.cache_fracs = {0, 0.25, 0.5, 0.75, 1};
  app.add_option("--bench", o.config.bench, "Benchmark to analyse (an executable in --bench-dir; or --exec)");
  app.add_flag("--exec", o.exec_mode,
               "Analyse the command after -- instead of a benchmark: a training script whose DataLoader the "
               "probe times (probe/mlbench_probe.py; docs/stall.md)");
  app.add_option("--probe-timeout", o.exec.probe_timeout_s,
                 "--exec: seconds a run may go without the probe's first report before it fails")
      ->check(core::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--exec-workdir", o.exec.workdir,
                 "--exec: run the command in this scratch folder (its relative paths resolve there) instead of "
                 "where mlbench-stall was started, behind an overlay that keeps its writes from your files")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--exec-writes-ok", o.exec.writes_ok,
               "--exec: run the command where mlbench-stall was started, without an overlay: what it writes "
               "there (checkpoints, logs) is harmless. Without this flag or --exec-workdir, an analysis that cannot "
               "mount an overlay refuses to start")
      ->excludes("--exec-workdir");
  app.add_option("--cache-batches", o.exec.cache_batches, "--exec: batches the compute-only run loads and then replays")
      ->check(core::integer_in(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--bench-dir", o.bench_dir, "Where benchmark executables are")->capture_default_str();
  auto* ranks = app.add_option("--ranks", o.config.ranks,
                               "A distributed benchmark (scaling): the ranks of its job on this machine, each on its "
                               "share of the CPUs and reporting on its own (default 1)");
  app.add_option("--data", o.config.data, "Dataset root (default: $DATA_DIRECTORY/fake-imagenet-small/train)");
  app.add_option("--cpus", o.config.cpus, "CPU counts of the prep sweep (default: 1 .. all)")->delimiter(',');
  auto* cache_fracs =
      app.add_option("--cache-fracs", o.config.cache_fracs, "Cache fractions to measure against the prediction")
          ->delimiter(',')
          ->check(core::number_in(0.0, 1.0))
          ->capture_default_str();
  auto* page_fracs =
      app.add_option("--page-fracs", o.config.page_fracs,
                     "Page-cache fractions, each made resident and held with --hold-page-cache, to check the "
                     "page-cache what-if against (0 < x < 1; 0: no such run)")
          ->delimiter(',')
          ->check(core::number_in(0.0, 1.0))
          ->capture_default_str();
  auto* io_depths =
      app.add_option("--io-depths", o.config.io_depths,
                     "Datasets over HTTP: the --io-depth values run to check the io-depth what-if against (runs the "
                     "model does not use)")
          ->delimiter(',')
          ->check(core::integer_in(1, 256))
          ->capture_default_str();
  app.add_option("--iterations", o.config.iterations, "Timed iterations per run")
      ->check(core::integer_in(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--rounds", o.rounds,
                 "Make every run N times, round after round, and use each run's median (a host whose speed drifts "
                 "over minutes: docs/stall.md)")
      ->check(core::integer_in(1, 100))
      ->capture_default_str();
  add_sizing_options(app, o);
  app.add_option("--out", o.out_dir, "Output directory (default: stall-<bench>)");
  app.add_option("--store", o.store,
                 "Also record the analysis in a results store (a SQLite file or a postgresql:// URL; docs/report.md)");
  app.add_option("--reanalyze", o.reanalyze_dir,
                 "Model a finished analysis in DIR again from its runs' reports, measuring nothing; writes "
                 "OUT/stall.json (default OUT: DIR, the old one kept as stall.v<schema>.json)");
  add_model_and_run_options(app, o);
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
    for (int i = own_argc + 1; i < argc; ++i) o.config.extra.emplace_back(argv[i]);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      parsed.exit = app.exit(e);
    } else {
      std::cerr << "mlbench-stall: error: " << core::parse_error_line(e) << " (see --help)\n";
      parsed.exit = 2;
    }
    return parsed;
  }
  o.sizing.target /= 100;  // --target-noise is in percent
  if (o.max_rounds == 0) o.max_rounds = o.rounds >= 2 ? std::min(100, o.rounds + 2) : o.rounds;
  o.cache_fracs_given = cache_fracs->count() > 0;
  o.page_fracs_given = page_fracs->count() > 0;
  o.io_depths_given = io_depths->count() > 0;
  o.ranks_given = ranks->count() > 0;
  return parsed;
}

namespace {

// The benchmarks that run a job of ranks of their own (--ranks K --rank-reports: each rank writes a
// report with its `rank` block and its sync wait).
constexpr std::array<std::string_view, 1> kDistributedBenches{"scaling"};

// --ranks K: K >= 1; for a distributed benchmark only, every run given `--ranks K --rank-reports`.
int check_ranks(StallOptions& o) {
  const int k = o.config.ranks;
  if (k < 1) {
    std::cerr << fmt::format("mlbench-stall: error: --ranks {}: a job has 1 rank or more\n", k);
    return 2;
  }
  if (o.exec_mode) {
    if (o.ranks_given) {
      std::cerr << "mlbench-stall: error: --ranks is for --bench: a command run with --exec starts its own ranks "
                   "(mp.spawn, torchrun, srun), and every rank's report is read\n";
      return 2;
    }
    return 0;
  }
  const bool distributed = std::find(kDistributedBenches.begin(), kDistributedBenches.end(), o.config.bench) !=
                           kDistributedBenches.end();
  if (!distributed) {
    if (k > 1) {
      std::cerr << fmt::format(
          "mlbench-stall: error: --ranks {}: benchmark '{}' is not distributed (the benchmarks that run ranks: "
          "scaling)\n",
          k, o.config.bench);
      return 2;
    }
    return 0;
  }
  if (without_flags(o.config.extra, {"--ranks", "--rank-reports"}).size() != o.config.extra.size()) {
    std::cerr << "mlbench-stall: error: give a job's ranks to mlbench-stall (--ranks K), not to the benchmark after "
                 "--: every run is then a job of K ranks, each writing its own report\n";
    return 2;
  }
  o.config.extra.insert(o.config.extra.end(), {"--ranks", std::to_string(k), "--rank-reports"});
  // The peer runs measure a partitioned cache of one process per node; a node's K ranks do not share
  // one, so they are not run for a job of ranks (the loopback measurement stands).
  if (k > 1) o.config.peer_nodes = 0;
  return 0;
}

// --exec: the command after --, which must be executable, and the probe beside the build.
int check_exec(StallOptions& o) {
  o.exec.command = o.config.extra;
  o.config.extra.clear();
  if (o.exec.command.empty()) {
    std::cerr << "mlbench-stall: error: --exec needs the command after --, e.g. mlbench-stall --exec --data DIR -- "
                 "/usr/bin/python3 train.py\n";
    return 2;
  }
  if (!o.config.bench.empty()) {
    std::cerr << "mlbench-stall: error: --bench and --exec exclude each other: --exec analyses the command after --\n";
    return 2;
  }
  if (o.cache_fracs_given) {
    std::cerr << "mlbench-stall: error: --cache-fracs needs mlbench's item cache (--bench); a command run with "
                 "--exec has none to size, so its what-if is predicted, not measured\n";
    return 2;
  }
  if (o.page_fracs_given) {
    std::cerr << "mlbench-stall: error: --page-fracs needs a benchmark that holds the page cache "
                 "(--hold-page-cache, --bench); a command run with --exec cannot be made to\n";
    return 2;
  }
  o.config.cache_fracs.clear();
  o.config.page_fracs.clear();
  if (!o.exec.workdir.empty()) {
    // The command runs in that folder: a relative path to its program would no longer resolve.
    const std::string& program = o.exec.command.front();
    if (program.find('/') != std::string::npos) o.exec.command.front() = fs::absolute(program).string();
  }
  const std::string found = find_executable(o.exec.command.front(), core::getenv_or("PATH", "/usr/bin:/bin"));
  const std::string problem = found.empty() ? "not found on PATH" : executable_problem(found);
  if (!problem.empty()) {
    std::cerr << fmt::format("mlbench-stall: error: cannot execute '{}': {}\n", o.exec.command.front(), problem);
    return 2;
  }
  o.exec.probe_dir = core::layout::probe_dir();
  if (!fs::exists(o.exec.probe_dir / "mlbench_probe.py")) {
    std::cerr << fmt::format(
        "mlbench-stall: error: the probe is not at {} (set MLBENCH_PROBE_DIR to the "
        "repository's probe/ folder)\n",
        (o.exec.probe_dir / "mlbench_probe.py").string());
    return 2;
  }
  o.config.bench = "exec";
  return 0;
}

}  // namespace

int check_options(StallOptions& o) {
  if (!o.exec_mode && (!o.exec.workdir.empty() || o.exec.writes_ok)) {
    std::cerr << "mlbench-stall: error: --exec-workdir and --exec-writes-ok are for --exec (the command after --)\n";
    return 2;
  }
  if (o.config.peer_nodes == 1) {
    std::cerr << "mlbench-stall: error: --peer-nodes 1: peers need two nodes or more (0 turns the peer runs off)\n";
    return 2;
  }
  if (o.exec_mode) {
    if (const int rc = check_exec(o)) return rc;
  } else if (o.config.bench.empty()) {
    std::cerr << "mlbench-stall: error: --bench is required (or --exec -- COMMAND) (see --help)\n";
    return 2;
  }
  const fs::path bench = fs::path(o.bench_dir) / o.config.bench;
  if (!o.exec_mode && !fs::exists(bench)) {
    std::cerr << fmt::format("mlbench-stall: error: unknown benchmark '{}': no executable {}\n", o.config.bench,
                             bench.string());
    return 2;
  }
  if (const int rc = check_ranks(o)) return rc;
  if (o.config.data.empty()) o.config.data = (fs::path(o.data_directory) / "fake-imagenet-small" / "train").string();
  if (remote_data(o.config)) {
    if (o.exec_mode) {
      std::cerr << "mlbench-stall: error: --exec reads the dataset's files; a dataset over HTTP (" << o.config.data
                << ") is analysed with --bench (loader, convnet, ...)\n";
      return 2;
    }
    if (o.page_fracs_given) {
      std::cerr << "mlbench-stall: error: --page-fracs holds local files in the page cache; " << o.config.data
                << " is served over HTTP\n";
      return 2;
    }
    o.config.page_fracs.clear();
  } else if (pipeline::is_shard_spec(o.config.data)) {
    // Tar shards are read forward with their members held until fetched: --hold-page-cache
    // (which the page-cache runs need) does not apply to them.
    if (o.page_fracs_given) {
      std::cerr << "mlbench-stall: error: --page-fracs holds image files in the page cache; " << o.config.data
                << " is tar shards, read sequentially\n";
      return 2;
    }
    o.config.page_fracs.clear();
  }
  if (!remote_data(o.config) && o.io_depths_given) {
    std::cerr << "mlbench-stall: error: --io-depths checks the what-if of a dataset over HTTP (--data http://...)\n";
    return 2;
  }
  if (o.out_dir.empty()) o.out_dir = "stall-" + o.config.bench;
  const int all_cpus = static_cast<int>(core::affinity_cpus().size());
  if (o.config.cpus.empty()) {
    for (int n = 1; n <= all_cpus; n *= 2) o.config.cpus.push_back(n);
    if (o.config.cpus.back() != all_cpus) o.config.cpus.push_back(all_cpus);
  }
  for (int n : o.config.cpus) {
    if (n < 1 || n > all_cpus) {
      std::cerr << fmt::format("mlbench-stall: error: --cpus {} is outside 1..{} (the CPUs this process may use)\n", n,
                               all_cpus);
      return 2;
    }
  }
  return 0;
}

}  // namespace mlbench::stall
