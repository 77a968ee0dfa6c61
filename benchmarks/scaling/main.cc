// scaling: data-parallel training of convnet's ResNet over c10d (Mila's
// `scaling`): N ranks, each reading its own shard of the dataset through the
// pipeline, gradients averaged by ProcessGroupGloo in buckets that overlap the
// backward pass (reducer.h). Rank 0 first trains alone for --baseline-iterations
// (the others wait at a barrier) to measure throughput(1), then all ranks train
// together; rank 0's report holds the global throughput, the scaling efficiency
// throughput(N) / (N x throughput(1)), and per rank the wait, compute and exposed
// allreduce time per iteration.
//
// Ranks come from the environment (MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, or a
// Slurm step: rendezvous.h); without one, rank 0 starts --ranks - 1 copies of
// itself on this machine, which share the slot's CPUs (--cpu-cores / N threads each,
// each rank on CPUs of its own where they divide: rank_cpus).
//
// Each rank reads its shard the way DistributedSampler deals it (the pipeline's sampler:
// one permutation per epoch from the common seed, every N-th position to each rank).
// With --rank-reports (what `mlbench-stall --bench scaling --ranks K` runs) every rank
// writes a report of its own, `<suite>.scaling.rank<k>.R<run>.D<slot>...json`, with a
// `rank` block, its own samples/s, and per iteration its sync wait (blocked on the
// allreduce after backward's computation) apart from its compute and data wait.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "benchmarks/models/parameter_count.h"
#include "benchmarks/models/vision_models.h"
#include "benchmarks/support/image_stream.h"
#include "benchmarks/support/torch_runtime.h"
#include "core/blas.h"
#include "core/environment.h"
#include "core/process.h"
#include "core/statistics.h"
#include "core/stop_signals.h"
#include "core/sysinfo.h"
#include "pipeline/sampler.h"
#include "reducer.h"
#include "rendezvous.h"
#include "source_hash.h"

namespace {

using namespace mlbench;

constexpr const char* kLocalEnv = "MLBENCH_SCALING_LOCAL";  // set in the copies rank 0 starts
constexpr double kStopGraceS = 3.0;  // a copy's time to end after SIGTERM when rank 0 did not complete

// The copies of this program that rank 0 starts in local mode, through
// core::Process (their own process group, killed with rank 0). Each copy's
// output goes to a log file of its own (one progress display: rank 0's); the
// log is removed when the copy succeeded and named in the failure otherwise.
struct Children {
  struct Child {
    int rank = 0;
    std::string log;
    core::Process process;
  };
  std::list<Child> running;                // a list: Process cannot be move-assigned
  std::map<int, core::ExitStatus> status;  // by rank, once reaped

  // Reaps those that ended (blocking: all of them); returns "" or why one failed.
  std::string reap(bool block) {
    std::string failed;
    for (auto it = running.begin(); it != running.end();) {
      const auto st = block ? std::optional<core::ExitStatus>(it->process.wait()) : it->process.try_wait();
      if (!st) {
        ++it;
        continue;
      }
      status[it->rank] = *st;
      std::error_code ec;
      if (st->exited && st->code == 0) {
        std::filesystem::remove(it->log, ec);
      } else if (failed.empty()) {
        failed = st->exited
                     ? fmt::format("rank {} exited with status {}", it->rank, st->code)
                     : fmt::format("rank {} was killed by signal {} ({})", it->rank, st->signal, strsignal(st->signal));
        const std::string last = last_line(it->log);
        failed += last.empty() ? fmt::format(" (its output: {})", it->log)
                               : fmt::format(": {} (its output: {})", last, it->log);
      }
      it = running.erase(it);
    }
    return failed;
  }
  // A failed allreduce: the rank that broke it may still be exiting. Polls up to
  // `seconds` for one that failed; "" when none did.
  std::string reap_failed_within(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::string failed;
    while ((failed = reap(false)).empty() && !running.empty() && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return failed;
  }
  void kill_all() {
    for (const auto& c : running) c.process.signal_group(SIGTERM);
  }
  // Rank 0 is ending without completing (a failure, Ctrl-C): the others may be
  // blocked in a collective that will never end, where their own SIGTERM
  // handling cannot act, so each gets SIGTERM and then SIGKILL after `grace`
  // seconds. Returns why one that had already ended on its own failed, or "".
  std::string stop_all(double grace) {
    const std::string failed = reap(false);
    for (auto& c : running) {
      status[c.rank] = c.process.stop(grace);
      std::error_code ec;
      std::filesystem::remove(c.log, ec);  // stopped by us: its output says nothing of the cause
    }
    running.clear();
    return failed;
  }

 private:
  // The last non-empty line of a file ("" when none).
  static std::string last_line(const std::string& path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    }
    return last;
  }
};

std::vector<std::string> g_args;  // this program's arguments: the copies run with the same flags
pid_t g_main_pid = 0;

// Starts ranks 1 .. world-1 as copies of this program (same flags), with the
// rendezvous in their environment; rank k on cpus[k] when given (rank_cpus).
std::shared_ptr<Children> spawn_ranks(int world, int port, const std::vector<std::vector<int>>& cpus) {
  auto children = std::make_shared<Children>();
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot start ranks: cannot read /proc/self/exe: " + ec.message());
  for (int rank = 1; rank < world; ++rank) {
    core::ProcessSpec spec;
    spec.executable = self.string();
    spec.args = g_args;
    spec.env = core::current_environment();
    (*spec.env)["RANK"] = std::to_string(rank);
    (*spec.env)["WORLD_SIZE"] = std::to_string(world);
    (*spec.env)["MASTER_ADDR"] = "127.0.0.1";
    (*spec.env)["MASTER_PORT"] = std::to_string(port);
    (*spec.env)[kLocalEnv] = "1";
    if (static_cast<std::size_t>(rank) < cpus.size()) spec.cpus = cpus[static_cast<std::size_t>(rank)];
    spec.output = core::Output::File;
    spec.log_path =
        (std::filesystem::temp_directory_path() / fmt::format("mlbench-scaling-{}-rank{}.log", g_main_pid, rank))
            .string();
    try {
      children->running.push_back({rank, spec.log_path, core::Process(spec)});
    } catch (const core::ProcessError& e) {
      children->kill_all();
      throw std::runtime_error(fmt::format("cannot start rank {}: {}", rank, e.what()));
    }
  }
  return children;
}

// Everything scaling's own flags set.
struct ScalingOptions {
  pipeline::PipelineOptions pipeline;
  std::string arch = "resnet18";
  std::int64_t classes = 1000;
  double lr = 0.1, momentum = 0.9, weight_decay = 1e-4;
  int ranks = 2;
  double bucket_mb = 25.0;      // DistributedDataParallel's default bucket_cap_mb
  double first_bucket_mb = 1.0;  // ... and its first bucket's (_DEFAULT_FIRST_BUCKET_BYTES)
  int baseline_iterations = 0;  // 0: --number x 2
  double timeout_s = 300;
  bool rank_reports = false;  // every rank writes its own report (mlbench-stall --ranks)
};

void add_flags(core::BenchCli& cli, ScalingOptions& opt) {
  pipeline::add_pipeline_flags(cli, opt.pipeline);
  cli.add_option("--arch", opt.arch, "Model: resnet18, resnet34, resnet50, resnet101 or resnet152")
      ->check(CLI::IsMember(bench::vision::resnet_archs()))
      ->capture_default_str();
  cli.add_option("--classes", opt.classes, "Output classes (at least the dataset's class count)")
      ->check(core::integer_at_least(2));
  cli.add_option("--lr", opt.lr, "SGD learning rate")->check(core::number_above(0));
  cli.add_option("--ranks", opt.ranks,
                 "Ranks started on this machine when the environment names none (MASTER_*/RANK/WORLD_SIZE or a "
                 "Slurm step); they share --cpu-cores")
      ->check(core::integer_in(1, 64))
      ->capture_default_str();
  cli.add_option("--bucket-mb", opt.bucket_mb, "Gradient bucket size, MiB (one async allreduce per full bucket)")
      ->check(core::number_above(0))
      ->capture_default_str();
  cli.add_option("--first-bucket-mb", opt.first_bucket_mb,
                 "The first bucket's size, MiB (the last layers' gradients, ready first: its allreduce starts early)")
      ->check(core::number_above(0))
      ->capture_default_str();
  cli.add_option("--baseline-iterations", opt.baseline_iterations,
                 "Iterations rank 0 trains alone to measure throughput(1) (0: 2 x --number)")
      ->check(core::integer_in(0, 1 << 20));
  cli.add_option("--timeout", opt.timeout_s, "Seconds a rank waits for the others (rendezvous, allreduce)")
      ->check(core::number_above(0))
      ->capture_default_str();
  cli.add_flag("--rank-reports", opt.rank_reports,
               "Every rank writes its own report (.rank<k> in its name, a rank block, its own samples/s and its "
               "per-iteration sync wait): what mlbench-stall --ranks reads");
}

// After parsing: prints the error and returns 2 when a flag does not apply.
std::optional<int> validate(const core::BenchOptions& o) {
  if (o.min_time > 0) {
    std::cerr << "scaling: error: --min-time is not supported: every rank must run the same --number\n";
    return 2;
  }
  return std::nullopt;
}

// Everything one rank trains with; the same on every rank.
struct Rank {
  scaling::Rendezvous rv;
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::shared_ptr<Children> children;  // rank 0 in local mode
  int threads = 1;
};

// Pins this process (its threads started from now on) to `cpus`; false when it cannot.
bool pin_self(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int c : cpus) CPU_SET(c, &mask);
  return ::sched_setaffinity(0, sizeof mask, &mask) == 0;
}

Rank connect(const core::BenchOptions& o, const ScalingOptions& opt) {
  Rank r;
  auto from_env = scaling::rendezvous_from_env();
  const bool spawn = !from_env;
  if (spawn) {
    r.rv = {0, opt.ranks, "127.0.0.1", 0, "local"};
  } else {
    r.rv = *from_env;
    if (scaling::process_env(kLocalEnv)) r.rv.source = "local";
  }
  const bool local = r.rv.source == "local";
  // Local ranks share the slot's CPUs; elsewhere each rank has its own.
  r.threads = local ? std::max(1, o.cpu_cores / r.rv.world) : o.cpu_cores;
  // Local ranks each on CPUs of their own where they divide: rank 0 pins itself before it
  // starts a thread (the store's), and starts every copy on its share.
  std::vector<std::vector<int>> cpus;
  if (spawn) {
    const std::vector<int> all = core::affinity_cpus();
    for (int k = 0; k < r.rv.world; ++k) cpus.push_back(scaling::rank_cpus(all, r.threads, r.rv.world, k));
    pin_self(cpus.front());
  }
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(r.rv.master_port);  // 0 on local rank 0: any free port
  so.isServer = r.rv.rank == 0;
  so.numWorkers = r.rv.world;
  so.waitWorkers = false;
  so.timeout = std::chrono::milliseconds(static_cast<long>(opt.timeout_s * 1000));
  r.store = c10::make_intrusive<c10d::TCPStore>(r.rv.master_addr, so);
  if (spawn) {
    r.rv.master_port = r.store->getPort();
    if (r.rv.world > 1) r.children = spawn_ranks(r.rv.world, r.rv.master_port, cpus);
  }
  auto go = c10d::ProcessGroupGloo::Options::create();
  go->timeout = std::chrono::milliseconds(static_cast<long>(opt.timeout_s * 1000));
  go->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                              : c10d::ProcessGroupGloo::createDefaultDevice());
  r.pg = c10::make_intrusive<c10d::ProcessGroupGloo>(r.store, r.rv.rank, r.rv.world, go);
  return r;
}

// Per-iteration exposed allreduce seconds, by iteration index over the run; and, per kept
// iteration, the phases with the sync wait apart (the report's stall.sync under --rank-reports).
struct AllreduceLog {
  std::vector<double> exposed;
  double pending = 0;  // the exposed allreduce of the iteration in progress (0 without a step's)
  core::StatAccumulator wait, h2d, compute, sync;  // kept iterations; compute less sync
  double mean_after(long skip) const {
    double sum = 0;
    long n = 0;
    for (std::size_t i = static_cast<std::size_t>(std::max(0L, skip)); i < exposed.size(); ++i) sum += exposed[i], ++n;
    return n > 0 ? sum / static_cast<double>(n) : std::nan("");
  }
};

// Whether every rank ends with the same weights (the averaging worked): the sum
// of all parameters, its max and min over the ranks. A collective: every rank calls it
// once, after its loop.
nlohmann::json params_in_sync(scaling::Collectives& pg, const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  double sum = 0;
  for (const auto& p : params) sum += p.to(torch::kCPU, torch::kDouble).sum().item<double>();
  auto hi = torch::tensor({sum}, torch::kDouble), lo = torch::tensor({-sum}, torch::kDouble);
  std::vector<torch::Tensor> t{torch::cat({hi, lo})};
  pg.allreduce(t, c10d::AllreduceOptions{c10d::ReduceOp::MAX})->wait();
  const double max = t[0][0].item<double>(), min = -t[0][1].item<double>();
  return {
      {"param_sum_max", max}, {"param_sum_min", min}, {"in_sync", max - min <= 1e-6 * std::max(1.0, std::abs(max))}};
}

// Fault injection for tests: MLBENCH_SCALING_FAIL_RANK=k makes rank k exit with
// status 3 after its set-up, as a crashed rank would.
void maybe_fail(int rank) {
  if (auto v = scaling::process_env("MLBENCH_SCALING_FAIL_RANK"); v && *v == std::to_string(rank)) {
    std::cerr << fmt::format("scaling: rank {}: failing on purpose (MLBENCH_SCALING_FAIL_RANK)\n", rank);
    std::_Exit(3);
  }
}

// Each rank's shard of the dataset (or, under --synthetic, one batch of its own): the pipeline's
// sampler deals it as DistributedSampler does (every rank draws the same permutation of the
// dataset each epoch from the common --seed and takes every world-th position from its rank on).
std::shared_ptr<bench::vision::ImageStream> open_stream(const core::BenchOptions& o, const ScalingOptions& opt,
                                                        const bench::TorchContext& ctx, int r, int world) {
  const pipeline::PipelineOptions& popts = opt.pipeline;
  return bench::vision::make_image_stream(
      o, popts, ctx.device,
      {.dataset = "fake-imagenet-small",
       .synthetic =
           [&] { return bench::vision::synthetic_batch(o.batch_size, popts.image_size, opt.classes, ctx.device); },
       .transform =
           [&](pipeline::LoaderConfig& c) {
             c.num_shards = world;
             c.shard_id = r;
           },
       .open =
           [&](const std::string& path) {
             auto all = bench::vision::open_image_source(o, path, "fake-imagenet-small", popts);
             const pipeline::Sampler shard(all->size(), false, 0, world, r);
             if (shard.shard_size() < static_cast<std::size_t>(o.batch_size)) {
               throw core::UsageError(
                   fmt::format("{} has {} items: rank {}'s shard of {} is smaller than a batch of {}", path,
                               all->size(), r, shard.shard_size(), o.batch_size));
             }
             return bench::vision::PipelineSource{all, {}};
           }});
}

// A report's `rank` block (docs/report-format.md, "Ranks of a distributed job"), as the Python
// probe writes it: `from` is "local" for the ranks rank 0 started, else "env".
nlohmann::json rank_block(const scaling::Rendezvous& rv) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  const auto local = scaling::local_rank_of(rv);
  return {{"rank", rv.rank},
          {"local_rank", local ? nlohmann::json(*local) : nlohmann::json()},
          {"world_size", rv.world},
          {"from", rv.source == "local" ? "local" : "env"},
          {"host", std::string(host)}};
}

// --rank-reports: the report's stall block with the sync wait apart (stall.sync, taken out of
// stall.compute, as the Python probe writes it) and the rank block.
void add_rank_report_blocks(nlohmann::json& report, const AllreduceLog& log, const scaling::Rendezvous& rv) {
  report["rank"] = rank_block(rv);
  if (!report["stall"].is_object() || log.compute.count() == 0) return;
  nlohmann::json& st = report["stall"];
  st["compute"] = log.compute.to_json();
  st["sync"] = log.sync.to_json();
  const double total = log.wait.sum() + log.h2d.sum() + log.compute.sum() + log.sync.sum();
  st["sync_pct"] = total > 0 ? nlohmann::json(100 * log.sync.sum() / total) : nlohmann::json();
}

std::shared_ptr<bench::vision::ResNet> make_model(const ScalingOptions& opt, const torch::Device& device) {
  auto m = std::make_shared<bench::vision::ResNet>(bench::vision::resnet_spec(opt.arch), opt.classes);
  (*m)->to(device);
  (*m)->train();
  return m;
}

std::shared_ptr<torch::optim::SGD> make_optimizer(const ScalingOptions& opt, const std::vector<torch::Tensor>& ps) {
  return std::make_shared<torch::optim::SGD>(
      ps, torch::optim::SGDOptions(opt.lr).momentum(opt.momentum).weight_decay(opt.weight_decay));
}

// The baseline: rank 0 alone (the others wait at the barrier), same threads per
// rank, on a model of its own so that the ranks' weights stay equal. Returns its
// iterations, seconds and items per second.
nlohmann::json measure_baseline(const core::BenchOptions& o, const ScalingOptions& opt, const torch::Device& device,
                                bench::vision::ImageStream& stream) {
  const int base_iters = opt.baseline_iterations > 0 ? opt.baseline_iterations : 2 * o.number;
  auto alone = make_model(opt, device);
  auto alone_opt = make_optimizer(opt, (*alone)->parameters());
  auto alone_step = [&](const bench::vision::DeviceBatch& b) {
    alone_opt->zero_grad();
    auto l = torch::cross_entropy_loss((*alone)->forward(b.images), b.labels);
    l.backward();
    alone_opt->step();
  };
  std::cout << fmt::format("scaling: baseline: rank 0 alone for {} iterations, the other ranks wait\n", base_iters)
            << std::flush;
  core::Iteration warm;
  alone_step(stream.next(warm));  // first iteration: allocations, not timed
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < base_iters; ++i) {
    // Outside the training loop, so its own check does not run yet: Ctrl-C here
    // ends the run with a FAIL report (the copies are killed as rank 0 unwinds).
    if (const int sig = core::stop_signal()) throw core::Interrupted(sig);
    core::Iteration it;
    alone_step(stream.next(it));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {{"iterations", base_iters}, {"seconds", s}, {"items_per_s", base_iters * o.batch_size / s}};
}

// One step; with the reducer, gradients averaged across ranks.
bench::vision::TrainStep make_step(std::shared_ptr<bench::vision::ResNet> model,
                                   std::shared_ptr<torch::optim::SGD> optimizer,
                                   std::shared_ptr<scaling::BucketReducer> reducer, std::shared_ptr<AllreduceLog> log,
                                   std::shared_ptr<Rank> rank) {
  return [=](const bench::vision::DeviceBatch& b) {
    if (!reducer) optimizer->zero_grad();  // the reducer's prepare() zeroes the grads (its buckets)
    auto l = torch::cross_entropy_loss((*model)->forward(b.images), b.labels);
    if (reducer) {
      reducer->prepare();
      (l * reducer->loss_scale()).backward();  // the allreduced sum is then the average
    } else {
      l.backward();
    }
    if (reducer) {
      try {
        log->exposed.push_back(reducer->finish());
        log->pending = log->exposed.back();
      } catch (const std::exception& e) {
        std::string why = rank->children ? rank->children->reap_failed_within(5.0) : "";
        throw std::runtime_error(why.empty() ? fmt::format("allreduce failed: {}", e.what())
                                             : fmt::format("{} (allreduce failed: {})", why, e.what()));
      }
    }
    optimizer->step();
    return l;
  };
}

// The training set-up every rank runs: model, shard, reducer; rank 0 measures the
// one-rank baseline first. Returns the workload of the N-rank loop.
core::Workload make_workload(const core::BenchOptions& o, const ScalingOptions& opt, const bench::TorchContext& ctx,
                             std::shared_ptr<Rank> rank, nlohmann::json& baseline) {
  torch::manual_seed(o.seed);  // every rank starts from the same weights
  torch::set_num_threads(rank->threads);
  core::set_blas_threads(rank->threads);
  const int r = rank->rv.rank, world = rank->rv.world;
  const pipeline::PipelineOptions& popts = opt.pipeline;
  auto stream = open_stream(o, opt, ctx, r, world);
  // The same weights on every rank: built right after the common seed.
  auto model = make_model(opt, ctx.device);
  auto params = (*model)->parameters();
  auto optimizer = make_optimizer(opt, params);
  // run_benchmark's memory check runs this set-up in a forked child with a small
  // batch: that child must not talk to the other ranks (it shares rank 0's sockets).
  const bool memory_probe = getpid() != g_main_pid;
  auto reducer = memory_probe || world == 1
                     ? nullptr
                     : std::make_shared<scaling::BucketReducer>(
                           rank->pg, params, static_cast<std::int64_t>(opt.bucket_mb * 1024 * 1024),
                           static_cast<std::int64_t>(std::min(opt.first_bucket_mb, opt.bucket_mb) * 1024 * 1024));
  auto log = std::make_shared<AllreduceLog>();
  auto step = make_step(model, optimizer, reducer, log, rank);
  if (memory_probe) return bench::vision::image_workload(o, popts, stream, step, [](nlohmann::json&) {});

  if (r == 0 && world > 1) baseline = measure_baseline(o, opt, ctx.device, *stream);
  rank->pg->barrier()->wait();
  maybe_fail(r);

  auto work = bench::vision::image_workload(o, popts, stream, step, [=, arch = opt.arch](nlohmann::json& m) {
    m["arch"] = arch;
    m["parameters"] = bench::parameter_count(**model);
    m["buckets"] = reducer ? nlohmann::json(reducer->buckets()) : nlohmann::json();
    m["allreduce_bytes_per_iteration"] = reducer ? nlohmann::json(reducer->bytes_per_iteration()) : nlohmann::json();
  });
  // The global batch; under --rank-reports each rank's own (the samples/s of a rank, as mlbench-stall
  // reads every rank's report; rank 0's metrics.throughput_n is still the job's).
  work.items_per_iteration = static_cast<double>(o.batch_size) * (opt.rank_reports ? 1 : world);
  auto finish = work.finish;
  const long skip = static_cast<long>(o.warmup) * o.number;
  const long total = static_cast<long>(o.repeat) * o.number;
  work.on_iteration = [log, skip](long index, const core::Iteration& it) {
    const double sync = std::clamp(log->pending, 0.0, it.compute_s());
    log->pending = 0;
    if (index < skip) return;
    log->wait.add(it.wait_s());
    log->h2d.add(it.h2d_s());
    log->compute.add(it.compute_s() - sync);
    log->sync.add(sync);
  };
  work.finish = [finish, log, skip, total, rank, params, rank_reports = opt.rank_reports](nlohmann::json& report) {
    if (finish) finish(report);
    if (rank_reports) add_rank_report_blocks(report, *log, rank->rv);
    report["metrics"]["allreduce_exposed_s"] = log->mean_after(skip);
    // Only after a whole loop: a rank that stopped early would wait for the others forever.
    if (rank->rv.world > 1 && report.value("iterations", total) >= total) {
      report["metrics"]["weights"] = params_in_sync(*rank->pg, params);
    }
  };
  return work;
}

// A rank's figures for rank 0's metrics.ranks, through the store (after a whole loop).
void hand_to_rank0(Rank& rank, const nlohmann::json& stats) {
  const std::string text = stats.dump();
  rank.store->set(fmt::format("scaling/rank/{}", rank.rv.rank), std::vector<std::uint8_t>(text.begin(), text.end()));
}

// Under --rank-reports, a rank other than 0 runs as rank 0 does and writes its own report; its
// figures (from that report: compute less its sync) go to rank 0 too.
int run_rank_with_report(const core::BenchCli& cli, const ScalingOptions& opt, std::shared_ptr<Rank> rank) {
  const core::BenchOptions& o = cli.options();
  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    nlohmann::json unused;
    core::Workload work = make_workload(o, opt, ctx, rank, unused);
    auto finish = work.finish;
    const long total = static_cast<long>(o.repeat) * o.number;
    work.finish = [finish, rank, total](nlohmann::json& report) {
      if (finish) finish(report);
      if (report.value("iterations", 0L) < total) return;  // rank 0 reads the store only after a whole loop
      const nlohmann::json& st = report["stall"];
      auto avg = [](const nlohmann::json& s) {
        return s.is_object() && s["avg"].is_number() ? s["avg"] : nlohmann::json();
      };
      hand_to_rank0(*rank, {{"rank", rank->rv.rank},
                            {"items_per_s", report["train_item"]["avg"]},
                            {"wait_s", avg(st["wait"])},
                            {"compute_s", avg(st["compute"])},
                            {"sync_s", avg(st["sync"])},
                            {"allreduce_exposed_s", report["metrics"]["allreduce_exposed_s"]},
                            {"weights", report["metrics"].value("weights", nlohmann::json())}});
    };
    return work;
  });
}

// A rank other than 0 trains the same loop and hands its figures to rank 0.
int run_other_rank(const core::BenchOptions& o, const ScalingOptions& opt, std::shared_ptr<Rank> rank) {
  const int r = rank->rv.rank;
  try {
    const bench::TorchContext ctx = bench::make_torch_context(o);
    nlohmann::json unused;
    core::Workload work = make_workload(o, opt, ctx, rank, unused);
    core::LoopConfig config;
    config.repeat = o.repeat;
    config.number = o.number;
    config.warmup = o.warmup;
    config.interrupted = [] { return core::stop_signal(); };
    core::LoopResult result;
    const core::StopSignals stop(core::StopSignals::Calls::kInterrupt);
    core::TrainLoop(config).run(work.step, result);
    nlohmann::json report = {{"iterations", result.iterations}};
    if (work.finish) work.finish(report);
    const double it_s = result.iteration.mean();
    const nlohmann::json stats = {{"rank", r},
                                  {"items_per_s", o.batch_size / it_s},
                                  {"wait_s", result.wait.mean()},
                                  {"compute_s", result.compute.mean()},
                                  {"allreduce_exposed_s", report["metrics"]["allreduce_exposed_s"]},
                                  {"weights", report["metrics"].value("weights", nlohmann::json())}};
    hand_to_rank0(*rank, stats);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("scaling: rank {}: error: {}\n", r, e.what());
    return 1;
  }
}

// metrics.ranks: rank 0's figures from its report, then, after a whole loop,
// those every other rank left in the store.
nlohmann::json gather_ranks(nlohmann::json& report, const Rank& rank, bool completed) {
  nlohmann::json ranks = nlohmann::json::array();
  const nlohmann::json& stall = report["stall"];
  auto avg = [](const nlohmann::json& s) {
    return s.is_object() && s["avg"].is_number() ? s["avg"] : nlohmann::json();
  };
  ranks.push_back({{"rank", 0},
                   {"wait_s", avg(stall["wait"])},
                   {"compute_s", avg(stall["compute"])},
                   {"allreduce_exposed_s", report["metrics"]["allreduce_exposed_s"]}});
  if (stall.contains("sync")) ranks.back()["sync_s"] = avg(stall["sync"]);
  for (int k = 1; k < rank.rv.world && completed; ++k) {
    try {
      const auto bytes = rank.store->get(fmt::format("scaling/rank/{}", k));
      ranks.push_back(nlohmann::json::parse(std::string(bytes.begin(), bytes.end())));
    } catch (const std::exception& e) {
      ranks.push_back({{"rank", k}, {"error", e.what()}});
    }
  }
  return ranks;
}

// Rank 0's report: the world, every rank's figures, the baseline and the
// scaling efficiency; the copies it started are reaped (or stopped).
void rank0_metrics(nlohmann::json& report, const core::BenchOptions& o, const ScalingOptions& opt, Rank& rank,
                   const nlohmann::json& baseline) {
  const int world = rank.rv.world;
  nlohmann::json& m = report["metrics"];
  m["world_size"] = world;
  m["rendezvous"] = rank.rv.source;
  m["threads_per_rank"] = rank.threads;
  m["reducer"] =
      "grads as views of their buckets, a hook after each accumulation: async ProcessGroupGloo allreduce per full "
      "bucket, overlapping backward";
  m["bucket_mb"] = opt.bucket_mb;
  m["first_bucket_mb"] = opt.first_bucket_mb;
  m["rank_reports"] = opt.rank_reports;
  const bool completed = report.value("iterations", 0L) >= static_cast<long>(o.repeat) * o.number;
  m["ranks"] = gather_ranks(report, rank, completed);
  m["baseline"] = baseline;
  // Under --rank-reports train_item is rank 0's own samples/s; the job steps at one pace.
  const double n_rate = report["train_item"].is_object() && report["train_item"]["avg"].is_number()
                            ? report["train_item"]["avg"].get<double>() * (opt.rank_reports ? world : 1)
                            : std::nan("");
  if (world > 1 && baseline.contains("items_per_s") && std::isfinite(n_rate)) {
    const double one = baseline["items_per_s"].get<double>();
    m["throughput_1"] = one;
    m["throughput_n"] = n_rate;
    m["scaling_efficiency"] = n_rate / (world * one);
  } else {
    m["scaling_efficiency"] = world == 1 ? nlohmann::json(1.0) : nlohmann::json();
  }
  if (rank.children) {
    const std::string failed = completed ? rank.children->reap(true) : rank.children->stop_all(kStopGraceS);
    if (!failed.empty()) m["rank_failure"] = failed;
  }
}

int run(const core::BenchCli& cli, const ScalingOptions& opt) {
  const core::BenchOptions& o = cli.options();
  std::shared_ptr<Rank> rank;
  try {
    rank = std::make_shared<Rank>(connect(o, opt));
  } catch (const std::exception& e) {
    std::cerr << "scaling: error: cannot join the ranks: " << e.what() << "\n";
    return 1;
  }
  if (rank->rv.rank != 0) return opt.rank_reports ? run_rank_with_report(cli, opt, rank) : run_other_rank(o, opt, rank);

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    auto baseline = std::make_shared<nlohmann::json>();
    core::Workload work = make_workload(o, opt, ctx, rank, *baseline);
    auto finish = work.finish;
    work.finish = [=, &o, &opt](nlohmann::json& report) {
      if (finish) finish(report);
      rank0_metrics(report, o, opt, *rank, *baseline);
    };
    return work;
  });
}

}  // namespace

int main(int argc, char** argv) {
  g_args.assign(argv + 1, argv + argc);
  g_main_pid = getpid();
  core::BenchCli cli("scaling", "scaling: data-parallel ResNet training over c10d (Gloo), efficiency against one rank",
                     {.batch_size = 32, .repeat = 10, .number = 5, .workers = 1});
  ScalingOptions opt;
  add_flags(cli, opt);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (auto rc = validate(cli.options())) return *rc;
  return run(cli, opt);
}
