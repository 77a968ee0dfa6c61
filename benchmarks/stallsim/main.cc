// stallsim: a training benchmark whose costs are known, read through the real
// pipeline: fetch from storage of a set bandwidth (emulated over real files,
// honouring the page cache), prep of a set cost per sample on a set number of
// CPUs, and compute of a set cost per batch. With those, the true rates are
//   G = batch / compute,  P = cpus / prep,  F = bandwidth / file size,
// which mlbench-stall's tests compare its measurements against.
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/benchmark_run.h"
#include "core/process.h"
#include "core/rng.h"
#include "emulated_storage.h"
#include "pipeline/options.h"
#include "source_hash.h"

namespace {

using namespace mlbench;

double thread_cpu_seconds() {
  return 1e-9 * static_cast<double>(core::this_thread_cpu_ns());
}

// Burns `seconds` of this thread's CPU time.
void burn_cpu(double seconds) {
  const double end = thread_cpu_seconds() + seconds;
  volatile double x = 1.0;
  while (thread_cpu_seconds() < end) {
    for (int i = 0; i < 256; ++i) x = x * 1.0000001 + 1e-9;
  }
}

// `n` virtual CPUs, each busy for exactly `seconds` per sample, shared first
// come, first served. Like the emulated storage device, each keeps a virtual
// clock: a sample starts when its CPU is free (or when it arrives, if later)
// and the worker sleeps until the sample's end, so a late wake-up of one
// worker does not delay the samples queued behind it and the prep rate stays
// exactly n / seconds under load.
class CpuPool {
 public:
  explicit CpuPool(int n) : free_at_(static_cast<std::size_t>(std::max(1, n))) {}
  void run(double seconds) {
    const auto now = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point end;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto cpu = std::min_element(free_at_.begin(), free_at_.end());
      const auto start = std::max(now, *cpu);
      end = start +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
      *cpu = end;
    }
    std::this_thread::sleep_until(end);
  }

 private:
  std::mutex mu_;
  std::vector<std::chrono::steady_clock::time_point> free_at_;
};

// The emulated accelerator, with a virtual clock like CpuPool's. A batch that
// was already queued when the consumer asked for it (it came back within
// kQueuedWait) starts where the previous batch ended, as a GPU's asynchronous
// queue runs the next batch while its host thread wakes late: otherwise every
// late wake-up of the sleeping consumer on a loaded machine would slow the
// emulated accelerator (the synthetic run measured G 22% low beside a build
// and a disk writer). At most one batch's length of lateness is absorbed, so a
// host that stays behind still slows it; a batch the consumer had to wait for
// starts when it came.
class Accelerator {
 public:
  static constexpr auto kQueuedWait = std::chrono::microseconds(200);
  // `late`: the host thread wakes that much after each batch's end (tests).
  void run(double seconds, bool queued, std::chrono::steady_clock::duration late = {}) {
    const auto length =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    const auto now = std::chrono::steady_clock::now();
    const bool first = free_at_ == std::chrono::steady_clock::time_point{};
    const auto start = queued && !first ? std::max(free_at_, now - length) : std::max(free_at_, now);
    free_at_ = start + length;
    std::this_thread::sleep_until(free_at_ + late);
  }

 private:
  std::chrono::steady_clock::time_point free_at_{};
};

// Everything stallsim's own flags set: the injected costs.
struct StallsimOptions {
  pipeline::PipelineOptions pipeline;
  double prep_ms = 1.0, compute_ms = 5.0, compute_jitter_ms = 0.0, storage_mbps = 0.0, late_wakeup_ms = 0.0;
  std::string prep_mode = "sleep", device = "cpu";
};

void add_flags(core::BenchCli& cli, StallsimOptions& opt) {
  pipeline::add_pipeline_flags(cli, opt.pipeline);
  cli.add_option("--prep-ms", opt.prep_ms, "Prep cost per sample, ms (on one of --cpu-cores CPUs)")
      ->check(core::number_in(0.0, 1e6))
      ->capture_default_str();
  cli.add_option("--prep-mode", opt.prep_mode,
                 "sleep: --cpu-cores virtual CPUs, each busy for --prep-ms per sample (exact under load); "
                 "busy: burn that much real CPU time")
      ->check(CLI::IsMember({"sleep", "busy"}))
      ->capture_default_str();
  cli.add_option("--compute-ms", opt.compute_ms, "Compute cost per batch, ms (an accelerator that sleeps)")
      ->check(core::number_in(0.0, 1e6))
      ->capture_default_str();
  cli.add_option("--compute-jitter-ms", opt.compute_jitter_ms,
                 "Random extra compute per batch, uniform in [0, ms) from --seed (an unstable run, for tests)")
      ->check(core::number_in(0.0, 1e6))
      ->capture_default_str();
  cli.add_option("--late-wakeup-ms", opt.late_wakeup_ms,
                 "The consumer wakes this much late after each batch's compute, as on a loaded machine (for tests: "
                 "the emulated accelerator must not slow down for it while batches are queued)")
      ->check(core::number_in(0.0, 1e6))
      ->capture_default_str();
  cli.add_option("--storage-mbps", opt.storage_mbps,
                 "Emulated storage bandwidth for reads not in the page cache, MB/s (0: the real device)")
      ->check(core::number_in(0.0, 1e9))
      ->capture_default_str();
  cli.add_option("--device", opt.device,
                 "The device the report names: cpu (the default), or another name for an accelerator of its own "
                 "(the emulated one costs no CPU; mlbench-stall then analyses it as it does a GPU run)")
      ->capture_default_str();
}

// After parsing: prints the error and returns 2 when --data is missing.
std::optional<int> validate(const core::BenchOptions& o) {
  if (!o.synthetic && o.data.empty()) {
    std::cerr << "stallsim: error: --data DIR is required (a folder of class folders of files) unless --synthetic\n";
    return 2;
  }
  return std::nullopt;
}

// The pipeline over the storage, its prep the injected cost; its workers started.
std::shared_ptr<pipeline::Loader> start_loader(const core::BenchOptions& o, const StallsimOptions& opt,
                                               std::shared_ptr<stallsim::EmulatedStorage> storage) {
  pipeline::LoaderConfig config = pipeline::benchmark_loader_config(o, opt.pipeline);
  if (config.transform.decode_on_device) {
    throw core::UsageError("--decode gpu: stallsim's prep is simulated, it decodes nothing");
  }
  // Prep runs on `cpu_cores` CPUs: virtual ones that sleep, or real ones that burn.
  auto cpus = std::make_shared<CpuPool>(o.cpu_cores);
  const double prep_s = opt.prep_ms / 1e3;
  if (opt.prep_mode == "sleep") {
    config.prep = [cpus, prep_s](const pipeline::Bytes&, std::size_t) { cpus->run(prep_s); };
  } else {
    config.prep = [prep_s](const pipeline::Bytes&, std::size_t) { burn_cpu(prep_s); };
  }
  auto loader = std::make_shared<pipeline::Loader>(storage, config);
  loader->start();
  return loader;
}

// The report's pipeline block (with the emulated storage's reads) and the injected costs in metrics.
void report_injected(nlohmann::json& report, const core::BenchOptions& o, const StallsimOptions& opt,
                     const pipeline::Loader& loader, const stallsim::EmulatedStorage* storage) {
  nlohmann::json p = loader.to_json();
  if (storage) {
    p["emulated_storage"] = {{"mb_per_s", opt.storage_mbps},
                             {"cached_reads", storage->cached_reads()},
                             {"device_reads", storage->device_reads()}};
  }
  report["pipeline"] = p;
  report["metrics"]["injected"] = {{"prep_ms", opt.prep_ms},
                                   {"prep_mode", opt.prep_mode},
                                   {"prep_cpus", o.cpu_cores},
                                   {"compute_ms", opt.compute_ms},
                                   {"compute_jitter_ms", opt.compute_jitter_ms},
                                   {"late_wakeup_ms", opt.late_wakeup_ms},
                                   {"storage_mbps", opt.storage_mbps}};
}

core::Workload make_workload(const core::BenchOptions& o, const StallsimOptions& opt,
                             std::shared_ptr<stallsim::EmulatedStorage> storage) {
  auto loader = start_loader(o, opt, storage);
  const bool fetch_only = opt.pipeline.fetch_only;
  const double compute_s = opt.compute_ms / 1e3;
  const double jitter_s = opt.compute_jitter_ms / 1e3;
  auto rng = std::make_shared<core::Rng>(core::splitmix64(static_cast<std::uint64_t>(o.seed)));
  core::Workload work;
  work.items_per_iteration = o.batch_size;
  auto accelerator = std::make_shared<Accelerator>();
  const auto late = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(opt.late_wakeup_ms / 1e3));
  work.step = [loader, fetch_only, compute_s, jitter_s, rng, accelerator, late](core::Iteration& it) {
    const auto asked = std::chrono::steady_clock::now();
    auto batch = it.wait([&] { return loader->next(); });
    if (!batch) throw std::runtime_error("the pipeline ended early");
    if (fetch_only) return;
    const bool queued = std::chrono::steady_clock::now() - asked < Accelerator::kQueuedWait;
    const double extra = jitter_s > 0 ? rng->uniform(0.0, jitter_s) : 0.0;
    it.compute([&] { accelerator->run(compute_s + extra, queued, late); });
    it.set_loss([] { return 1.0; });
  };
  work.finish = [loader, storage, &o, &opt](nlohmann::json& report) {
    report_injected(report, o, opt, *loader, storage.get());
    loader->stop();
  };
  return work;
}

int run(const core::BenchCli& cli, const StallsimOptions& opt) {
  const core::BenchOptions& o = cli.options();
  // Sleeps stand for work of a known length: the default 50 us timer slack
  // would add up to that much to each.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

  std::shared_ptr<stallsim::EmulatedStorage> storage;
  if (!o.synthetic) {
    try {
      storage = std::make_shared<stallsim::EmulatedStorage>(pipeline::open_image_folder(o.data, "", opt.pipeline),
                                                            opt.storage_mbps);
    } catch (const pipeline::DataError& e) {
      std::cerr << "stallsim: error: " << e.what() << "\n";
      return 2;
    }
  }

  core::RuntimeInfo runtime;
  runtime.framework = "none";
  runtime.device = opt.device;
  core::BenchmarkRun run(cli, MLBENCH_SOURCE_HASH, runtime);
  return run.run([&] { return make_workload(o, opt, storage); });
}

}  // namespace

int main(int argc, char** argv) {
  core::BenchCli cli("stallsim",
                     "stallsim: a benchmark with known fetch, prep and compute costs (ground truth for mlbench-stall)",
                     {.batch_size = 8, .repeat = 12, .number = 10, .workers = 8});
  StallsimOptions opt;
  add_flags(cli, opt);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (auto rc = validate(cli.options())) return *rc;
  return run(cli, opt);
}
