// Which benchmark runs a differential stall analysis needs, with which flags,
// in which page-cache state and on how many CPUs. Pure: no process, no file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace mlbench::stall {

// Partial: the dataset evicted, then a fraction of its files (RunSpec::cache_frac) read back into
// the page cache; the run holds it so (--hold-page-cache), checking the page-cache what-if.
enum class CacheState { Any, Warm, Cold, Partial };
const char* to_string(CacheState s);

struct StallConfig {
  std::string bench;                 // benchmark name (report label)
  std::string data;                  // dataset root passed as --data
  std::vector<int> cpus;             // CPU sweep; empty = none
  std::vector<double> cache_fracs;   // measured what-if points
  std::vector<double> page_fracs{0.5};  // page-cache fractions held with --hold-page-cache: its self-check
  int iterations = 100;              // timed iterations per run
  std::vector<std::string> extra;    // passed through to every run
  // The partitioned-cache what-if: each node's cache as a fraction of the dataset
  // (<= 0: 1/N for N nodes, each holding its partition), and whether the N nodes share this
  // machine's CPUs (a test on one machine) instead of having as many as it each.
  double node_cache = 0;
  bool nodes_share_cpus = false;
  // The CPU of a peer fetch measured with this many real nodes on loopback (plan_peer_runs);
  // 0: not measured, the back-to-back loopback figure only.
  int peer_nodes = 2;
  // Datasets over HTTP (--data http://...): the --io-depth values run as held-out checks of the
  // io-depth what-if (docs/stall.md, "Datasets over HTTP").
  std::vector<int> io_depths{1, 32};
  // --ranks: a distributed benchmark's ranks (scaling); every run is a job of that many, each rank
  // writing its own report (docs/stall.md, "Distributed jobs").
  int ranks = 1;
};

// --exec (stall/exec_target.h): the user's command and how the probe times it.
struct ExecConfig {
  std::vector<std::string> command;  // the user's command, argv[0] first
  std::filesystem::path probe_dir;   // the repo's probe/ (mlbench_probe.py, autoprobe/)
  int cache_batches = 8;             // compute-only run: batches cached, then replayed
  int probe_timeout_s = 120;         // no report by then: the command iterates no loader
  // Where the command's writes go (stall/exec_isolation.h): by default an overlay over the
  // working directory; --exec-workdir: the command runs in this scratch folder instead;
  // --exec-writes-ok: in place, its writes declared harmless.
  std::string workdir;
  bool writes_ok = false;
};

struct RunSpec {
  std::string label;       // "synthetic", "cached", "cold", "fetch-cold", "fetch-cached", "cpus-2", "cache-0.50"
  std::string kind;        // same without the value: "cpus", "cache", ...
  std::vector<std::string> args;
  CacheState cache = CacheState::Any;
  int cpus = 0;            // 0: every CPU of the analyzer; else the first `cpus` of its affinity
  double cache_frac = -1;  // for "cache" runs, and the page-cache fraction of "page" runs
  int io_depth = -1;       // for "iodepth" runs (datasets over HTTP): the run's --io-depth
  // Runs of several benchmark processes at once ("peer" runs): `nodes` processes
  // (0: one) on the analyzer's CPUs, each with `args`; with `peers`, a partitioned cache
  // across them on loopback (the executor adds --peers 127.0.0.1:PORT,... --rank R).
  int nodes = 0;
  bool peers = false;
  // --exec (stall/exec_target.h): the user's command, run as given instead of a benchmark with
  // `args`, and the probe's environment variables for this run.
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
};

// Whether the analysis's dataset is served over HTTP (its runs then fill the item cache for the
// cached runs instead of the page cache, and add the io-depth runs).
bool remote_data(const StallConfig& c);

// The spec a label names, for runs known only by their label (a finished analysis read back by
// --reanalyze): "cpus-N" (kind cpus, cpus N), "cache-X" and "page-X" (cache_frac X), "peer-local"
// and "peer-N" (nodes; peers for peer-N), "synthetic-xK" (nodes K); any other label is its own kind.
RunSpec spec_of_label(const std::string& label);

// The timed-iteration flags: `iterations` split into 10 observations, plus
// `warmup` observations dropped.
std::vector<std::string> iteration_args(int iterations, int warmup_observations);

// Every run, in order: synthetic, cached, cold, fetch-cold, fetch-cached, the
// CPU sweep, the cache fractions, the page-cache fractions (0 < x < 1; "page-0.50"). `items`: samples in the dataset;
// `batch_size`: as the benchmark reported it; `pipeline_depth`: batches the
// pipeline can have ready before the timed loop starts (prefetch + workers).
// Warm-up covers that depth (the first batches would come for free), and for
// cache runs also one epoch (the cache fills during the first).
std::vector<RunSpec> plan_runs(const StallConfig& config, std::size_t items, int batch_size, int pipeline_depth = 0);

// The partitioned cache's CPU per peer item, measured as the nodes pay it: two runs
// of `config.peer_nodes` processes at once, the dataset in the page cache, "peer-local" with
// the whole dataset in each node's item cache and "peer-N" with 1/N each and the rest fetched
// from the peers; whole epochs timed after one of warm-up, as the cache runs. Empty when
// peer_nodes < 2.
std::vector<RunSpec> plan_peer_runs(const StallConfig& config, std::size_t items, int batch_size,
                                    int pipeline_depth = 0);

// What each of K jobs gets of the device(s) they share (the coordinated what-if, on a
// device): for each K of `jobs` (K >= 2), K synthetic runs at once, "synthetic-x<K>", timed over
// kSharedDeviceLength x --iterations so that the jobs' start skew weighs little. One job's G is
// no bound for K jobs sharing a GPU: a job that launches small kernels leaves it mostly idle, and
// K of them get far more than G / K each (docs/stall.md, "Coordinated prep: K jobs sharing one
// machine"). On a CPU the same runs, for the K that fit the CPUs (shared_cpu_jobs), measure what
// K steps at once cost each other in CPU per sample.
inline constexpr int kSharedDeviceLength = 4;
std::vector<RunSpec> plan_shared_device_runs(const StallConfig& config, const std::vector<int>& jobs);

// Why the peer runs would not fit in memory, or "" when they do: each of `nodes` processes holds
// the whole dataset (`dataset_bytes`) in its item cache in `peer-local`, beside the page cache
// holding it once, so they must fit in half of `available_bytes` (MemAvailable; 0: unknown, no
// limit).
std::string peer_runs_memory_problem(int nodes, std::uint64_t dataset_bytes, std::uint64_t available_bytes);

// `extra` without the given flags (and their values): the sweep sets them itself.
std::vector<std::string> without_flags(const std::vector<std::string>& extra, const std::vector<std::string>& flags);

}  // namespace mlbench::stall
