#include "benchmark_run.h"

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <numeric>

#include <fmt/format.h>

#include "blas.h"
#include "instance_report.h"
#include "progress.h"
#include "report.h"
#include "stability.h"
#include "build_info.h"
#include "stop_signals.h"
#include "sysinfo.h"

namespace mlbench::core {

namespace {
nlohmann::json finite_or_null(const std::vector<double>& xs) {
  nlohmann::json out = nlohmann::json::array();
  for (double x : xs) out.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json());
  return out;
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
}  // namespace

BenchmarkRun::BenchmarkRun(const BenchCli& cli, std::string source_hash, RuntimeInfo runtime, Chrono::SyncHook sync)
    : cli_(cli),
      source_hash_(std::move(source_hash)),
      runtime_(std::move(runtime)),
      sync_(std::move(sync)),
      start_time_(utc_iso8601(std::chrono::system_clock::now())) {}

nlohmann::json BenchmarkRun::base_report() const {
  const BenchOptions& o = cli_.options();
  nlohmann::json machine = machine_description();
  machine["framework"] = runtime_.framework;
  machine["framework_version"] = runtime_.framework_version;
  machine["cuda_available"] = runtime_.cuda_available;
  return {{"schema_version", kInstanceReportSchema},
          {"name", o.name},
          {"suite", o.suite},
          {"run_id", o.run_id},
          {"vcd", o.vcd},
          {"jr_id", o.jr_id},
          {"batch_size", o.batch_size},
          {"workers", o.workers},
          {"cpu_cores", o.cpu_cores},
          {"repeat", o.repeat},
          {"number", o.number},
          {"min_time", o.min_time > 0 ? nlohmann::json(o.min_time) : nlohmann::json()},
          {"calibration", nullptr},
          {"stability", stability_of({}).to_json()},
          {"warmup", o.warmup},
          {"seed", o.seed},
          {"hostname", machine["hostname"]},
          {"gpu", runtime_.gpus.empty() ? nlohmann::json() : nlohmann::json(runtime_.gpus.front())},
          {"device", runtime_.device},
          {"version", {{"mlbench", build_info::kVersion}, {"git", build_info::kGitCommit}, {"source", source_hash_}}},
          {"unique_id", cli_.unique_id()},
          {"args", cli_.args_json()},
          {"machine", machine},
          {"batch_loss", nlohmann::json::array()},
          {"epoch_loss", nlohmann::json::array()},
          {"metrics", nlohmann::json::object()},
          {"stall", nullptr},
          {"pipeline", nullptr},
          {"resources", nullptr},
          {"start_time", start_time_}};
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

int BenchmarkRun::finish(nlohmann::json report, bool completed, const std::string& reason, int exit_code) {
  const BenchOptions& o = cli_.options();
  const auto now = std::chrono::system_clock::now();
  report["completed"] = completed;
  if (!completed) report["reason"] = reason;
  report["end_time"] = utc_iso8601(now);
  // Read at the end: an OpenMP OpenBLAS settles its thread count at its first call.
  if (report.contains("machine") && report["machine"].is_object()) report["machine"]["blas"] = to_json(loaded_blas());
  if (o.report_dir.empty()) {
    std::cout << report.dump(2) << "\n";
    return exit_code;
  }
  const std::filesystem::path file =
      std::filesystem::path(o.report_dir) / report_file_name(o.suite, o.name, o.run_id, o.jr_id, !completed, now);
  try {
    write_json_atomic(file, report);
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
  nlohmann::json report = base_report();
  print_config(std::cout);
  LoopResult result;
  Workload work;
  // Declared out of the try: a failed or interrupted run reports what it sampled too.
  std::unique_ptr<GpuMonitor> gpu_monitor;
  auto fill = [&] {
    if (gpu_monitor) {
      gpu_monitor->stop();
      report["gpu_monitor"] = gpu_monitor->to_json();
    }
    // The calibrated number once the probe ran, else the one asked for.
    const int used_number = result.number > 0 ? result.number : o.number;
    report["number"] = used_number;
    report["calibration"] = result.calibration ? result.calibration->to_json() : nlohmann::json();
    report["stability"] = stability_of(result.kept_observations()).to_json();
    report["train"] = result.chrono.has("train") ? result.chrono.stage("train").to_json("s") : nlohmann::json();
    for (const auto& name : result.chrono.names()) {
      if (name != "train") report[name] = result.chrono.stage(name).to_json("s");
    }
    report["train_item"] = result.chrono.has("train")
                               ? train_item(result.chrono.stage("train"), work.items_per_iteration * used_number)
                               : train_item(StatAccumulator(), 1.0);
    report["batch_loss"] = finite_or_null(result.batch_loss);
    report["epoch_loss"] = finite_or_null(result.epoch_loss);
    report["stall"] = result.stall_json();
    const auto kept = result.kept_observations();
    report["process_cpu"] =
        process_cpu(result.kept_cpu.user_s, result.kept_cpu.sys_s, std::accumulate(kept.begin(), kept.end(), 0.0),
                    work.items_per_iteration * used_number * static_cast<double>(kept.size()));
    report["iterations"] = result.iterations;
    if (work.finish) work.finish(report);
  };
  try {
    work = setup();
    LoopConfig config;
    config.repeat = o.repeat;
    config.number = o.number;
    config.min_time = o.min_time;
    config.warmup = o.warmup;
    config.sync = sync_;
    config.device_timeline = work.device_timeline;
    config.progress = &std::cout;
    config.progress_tty = is_terminal(1);
    config.interrupted = [] { return stop_signal(); };
    config.on_iteration = work.on_iteration;
    gpu_monitor = start_gpu_monitor();
    TrainLoop(config).run(work.step, result);
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
