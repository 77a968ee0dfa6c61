#include "benchmark_run.h"

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <numeric>

#include <fmt/format.h>

#include "blas.h"
#include "build_info.h"
#include "instance_report.h"
#include "progress.h"
#include "report.h"
#include "stability.h"
#include "stop_signals.h"
#include "sysinfo.h"

namespace mlbench::core {

namespace {
std::vector<std::optional<double>> finite_or_unset(const std::vector<double>& xs) {
  std::vector<std::optional<double>> out;
  for (double x : xs) out.push_back(std::isfinite(x) ? std::optional<double>(x) : std::nullopt);
  return out;
}

// The monitor's block as written (its samples), with the utilisation the readers use.
GpuMonitorInfo parse_gpu_monitor(const nlohmann::json& block) {
  return *parse_instance_report({{"gpu_monitor", block}}).gpu_monitor;
}

// SIGPIPE ignored while a run lasts: a write to a pipe or socket whose other end is gone (a
// crashed rank's gloo connection) fails with EPIPE, which the run reports as its failure, instead
// of ending the process with no report (exit 141). The previous disposition comes back after.
class IgnoreSigpipe {
 public:
  IgnoreSigpipe() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &previous_);
  }
  ~IgnoreSigpipe() { sigaction(SIGPIPE, &previous_, nullptr); }
  IgnoreSigpipe(const IgnoreSigpipe&) = delete;
  IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;

 private:
  struct sigaction previous_ {};
};
// The loop as the shared flags ask, with the workload's device timeline and per-iteration hook.
LoopConfig loop_config(const BenchOptions& o, const Workload& work, const Chrono::SyncHook& sync) {
  LoopConfig config;
  config.repeat = o.repeat;
  config.number = o.number;
  config.min_time = o.min_time;
  config.warmup = o.warmup;
  config.sync = sync;
  config.device_timeline = work.device_timeline;
  config.progress = &std::cout;
  config.progress_tty = is_terminal(1);
  config.interrupted = [] { return stop_signal(); };
  config.on_iteration = work.on_iteration;
  return config;
}

// The report's figures from the loop (also after a failure or an interrupt: what it sampled).
void fill_report(InstanceReport& report, const LoopResult& result, const Workload& work, GpuMonitor* gpu_monitor,
                 int asked_number) {
  if (gpu_monitor) {
    gpu_monitor->stop();
    report.gpu_monitor = parse_gpu_monitor(gpu_monitor->to_json());
  }
  // The calibrated number once the probe ran, else the one asked for.
  const int used_number = result.number > 0 ? result.number : asked_number;
  report.number = used_number;
  if (result.calibration) report.calibration = result.calibration->info();
  report.stability = stability_of(result.kept_observations()).info();
  const bool timed = result.chrono.has("train");
  if (timed) report.train = stats_of(result.chrono.stage("train"));
  report.train_item = timed ? train_item(result.chrono.stage("train"), work.items_per_iteration * used_number)
                            : train_item(StatAccumulator(), 1.0);
  report.batch_loss = finite_or_unset(result.batch_loss);
  report.epoch_loss = finite_or_unset(result.epoch_loss);
  report.stall = result.phases();
  const auto kept = result.kept_observations();
  report.process_cpu =
      process_cpu(result.kept_cpu.user_s, result.kept_cpu.sys_s, std::accumulate(kept.begin(), kept.end(), 0.0),
                  work.items_per_iteration * used_number * static_cast<double>(kept.size()),
                  result.kept_cpu.host_busy_s);
  report.iterations = result.iterations;
  // The benchmark's own blocks (metrics, pipeline) in its own shape; read back into the record,
  // so that a benchmark cannot write a report that the readers refuse.
  if (work.finish) {
    nlohmann::json j = to_json(report);
    work.finish(j);
    report = parse_instance_report(j);
  }
}
}  // namespace

BenchmarkRun::BenchmarkRun(const BenchCli& cli, std::string source_hash, RuntimeInfo runtime, Chrono::SyncHook sync)
    : cli_(cli),
      source_hash_(std::move(source_hash)),
      runtime_(std::move(runtime)),
      sync_(std::move(sync)),
      start_time_(utc_iso8601(std::chrono::system_clock::now())) {}

InstanceReport BenchmarkRun::base_report() const {
  const BenchOptions& o = cli_.options();
  InstanceReport r;
  // The fields every benchmark report has from the start, null or empty until filled.
  r.raw = {{"min_time", nullptr},
           {"calibration", nullptr},
           {"stall", nullptr},
           {"pipeline", nullptr},
           {"resources", nullptr},
           {"gpu", nullptr},
           {"batch_loss", nlohmann::json::array()},
           {"epoch_loss", nlohmann::json::array()},
           {"metrics", nlohmann::json::object()},
           {"vcd", ""}};
  r.schema_version = kInstanceReportSchema;
  r.name = o.name;
  r.suite = o.suite;
  r.run_id = o.run_id;
  r.vcd = o.vcd;
  r.jr_id = o.jr_id;
  r.batch_size = o.batch_size;
  r.workers = o.workers;
  r.cpu_cores = o.cpu_cores;
  r.repeat = o.repeat;
  r.number = o.number;
  if (o.min_time > 0) r.min_time = o.min_time;
  r.stability = stability_of({}).info();
  r.warmup = o.warmup;
  r.seed = o.seed;
  r.machine = machine_info();
  r.machine->framework = runtime_.framework;
  r.machine->framework_version = runtime_.framework_version;
  r.machine->cuda_available = runtime_.cuda_available;
  r.hostname = r.machine->hostname;
  if (!runtime_.gpus.empty()) r.gpu = runtime_.gpus.front();
  r.device = runtime_.device;
  r.version = VersionInfo{build_info::kVersion, build_info::kGitCommit, source_hash_};
  r.unique_id = cli_.unique_id();
  r.args = cli_.args_json();
  r.start_time = start_time_;
  return r;
}

void BenchmarkRun::print_config(std::ostream& out) const {
  const BenchOptions& o = cli_.options();
  out << fmt::format("{:-^60}\n", " " + o.name + " ");
  const nlohmann::json args = cli_.args_json();
  for (const auto& [key, value] : args.items()) {
    out << fmt::format("  {:<20} {}\n", key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  out << fmt::format("  {:<20} {}\n", "device", runtime_.device);
  out << fmt::format("  {:<20} {} {}\n", "framework", runtime_.framework, runtime_.framework_version);
  const BlasInfo blas = loaded_blas();
  out << fmt::format("  {:<20} {} ({})\n", "blas", blas.name, blas.backend.empty() ? "not loaded" : blas.backend);
  out << std::string(60, '-') << "\n";
  out.flush();
}

int BenchmarkRun::finish(InstanceReport report, bool completed, const std::string& reason, int exit_code) {
  const BenchOptions& o = cli_.options();
  const auto now = std::chrono::system_clock::now();
  report.completed = completed;
  report.reason = completed ? "" : reason;
  report.end_time = utc_iso8601(now);
  // Read at the end: an OpenMP OpenBLAS settles its thread count at its first call.
  if (report.machine) {
    const BlasInfo blas = loaded_blas();
    report.machine->blas = BlasBlock{blas.name, blas.library, blas.backend, blas.threads};
  }
  const nlohmann::json written = to_json(report);
  if (o.report_dir.empty()) {
    std::cout << written.dump(2) << "\n";
    return exit_code;
  }
  // A rank of a job of several whose report has a `rank` block (scaling --rank-reports): `.rank<k>`
  // before `.R`, as the Python probe names it, so that the ranks' reports do not collide.
  std::string name = o.name;
  if (const auto rk = written.find("rank"); rk != written.end() && rk->is_object()) {
    const auto rank = rk->find("rank"), world = rk->find("world_size");
    if (rank != rk->end() && rank->is_number_integer() && world != rk->end() && world->is_number_integer() &&
        world->get<int>() > 1) {
      name += fmt::format(".rank{}", rank->get<int>());
    }
  }
  const std::filesystem::path file =
      std::filesystem::path(o.report_dir) / report_file_name(o.suite, name, o.run_id, o.jr_id, !completed, now);
  try {
    write_json_atomic(file, written);
    report_path_ = file.string();
    std::cout << "Report: " << report_path_ << "\n";
  } catch (const std::exception& e) {
    std::cerr << o.name << ": error: " << e.what() << "\n";
    return exit_code == 0 ? 1 : exit_code;
  }
  return exit_code;
}

std::unique_ptr<GpuMonitor> BenchmarkRun::start_gpu_monitor() const {
  const BenchOptions& o = cli_.options();
  if (runtime_.device.rfind("cuda", 0) != 0 || !(o.monitor_interval > 0)) return nullptr;
  // The process's own CUDA_VISIBLE_DEVICES, not --vcd (which only labels the report):
  // it is what made "cuda:N" the GPU it is.
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const GpuSourceFactory& factory =
      gpu_source_factory_
          ? gpu_source_factory_
          : GpuSourceFactory([](const std::string& vcd, int ordinal) { return open_nvml_source(vcd, ordinal); });
  GpuSourceOrReason opened = factory(visible != nullptr ? visible : "", cuda_ordinal(runtime_.device));
  if (!opened.source) {
    std::cerr << o.name << ": " << opened.reason << "\n";
    return nullptr;
  }
  auto monitor = std::make_unique<GpuMonitor>(std::move(opened.source), o.monitor_interval, gpu_monitor_hooks_);
  monitor->start();
  return monitor;
}

int BenchmarkRun::run(const std::function<Workload()>& setup) {
  const BenchOptions& o = cli_.options();
  const StopSignals stop_signals(StopSignals::Calls::kInterrupt);
  const IgnoreSigpipe ignore_sigpipe;
  InstanceReport report = base_report();
  print_config(std::cout);
  LoopResult result;
  Workload work;
  // Declared out of the try: a failed or interrupted run reports what it sampled too.
  std::unique_ptr<GpuMonitor> gpu_monitor;
  const auto fill = [&] { fill_report(report, result, work, gpu_monitor.get(), o.number); };
  try {
    work = setup();
    gpu_monitor = start_gpu_monitor();
    TrainLoop(loop_config(o, work, sync_)).run(work.step, result);
    if (gpu_monitor) gpu_monitor->stop();  // the timed loop only, not after_loop
    if (result.calibration) {
      const Calibration& c = *result.calibration;
      std::cout << fmt::format("--min-time {:g} s: --number {} ({:.3g} s per iteration over {} probe iterations)\n",
                               c.target_s, c.number, c.seconds_per_iteration, c.probe_iterations);
    }
    if (work.after_loop) work.after_loop();
    fill();
    return finish(std::move(report), true, "", 0);
  } catch (const UsageError& e) {
    std::cerr << o.name << ": error: " << e.what() << "\n";
    return 2;
  } catch (const InputError& e) {
    // The error last, after the report's path: what a reader of the log's last line sees.
    const int code = finish(std::move(report), false, e.what(), 2);
    std::cout.flush();
    std::cerr << o.name << ": error: " << e.what() << "\n";
    return code;
  } catch (const Interrupted& e) {
    std::cerr << o.name << ": " << e.what() << "\n";
    fill();
    return finish(std::move(report), false, e.signal() == SIGINT ? "interrupted" : "terminated", 128 + e.signal());
  } catch (const std::exception& e) {
    std::cerr << o.name << ": error: " << e.what() << "\n";
    try {
      fill();
    } catch (const std::exception&) {
      // The failure report matters more than the partial figures.
    }
    return finish(std::move(report), false, e.what(), 1);
  }
}

}  // namespace mlbench::core
