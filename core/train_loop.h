// The timed training loop of Contract 1, free of any framework: `repeat`
// observations of `number` iterations each, every iteration split into
// wait (blocked on the next batch), h2d (copy to the device) and compute.
// Losses are resolved once per observation, so a device is synchronised only
// at the edges of timed regions.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "calibration.h"
#include "chrono.h"
#include "instance_report.h"
#include "nvtx.h"
#include "process.h"
#include "statistics.h"
#include "stop_signals.h"

namespace mlbench::core {

// The phases of an iteration, in order.
enum class PhaseKind { kWait = 0, kH2d = 1, kCompute = 2 };

// Device-side phase times (a GPU's CUDA events; bench::CudaTimeline): a mark
// is recorded on the device's stream at each edge of each phase, and the marks
// are read after the device was synchronised at the end of an observation, so
// nothing synchronises inside one. A phase's device time is the time between
// its two marks as the device reached them: for wait, how long the device sat
// idle for the batch (none when it was still busy with earlier work); for h2d,
// how long the step waited for its copy; for compute, the step's own work.
class DeviceTimeline {
 public:
  virtual ~DeviceTimeline() = default;
  virtual void begin(PhaseKind phase) = 0;
  virtual void end(PhaseKind phase) = 0;
  virtual void end_iteration() = 0;
  // After the device was synchronised: the seconds of {wait, h2d, compute} of
  // each iteration ended since the last call, in order (0 for a phase not marked).
  virtual std::vector<std::array<double, 3>> take() = 0;
};

// One iteration's phases; a benchmark's step calls wait(), h2d() and compute()
// around the matching work (each at most once; a phase not called counts 0).
class Iteration {
 public:
  using Clock = std::chrono::steady_clock;

  // `now`: the clock the phases read (LoopConfig::now; tests inject a fake).
  explicit Iteration(NowFn now = &steady_now) : now_(now), start_(now()) {}

  template <class F>
  decltype(auto) wait(F&& f) {
    Phase p(*this, wait_s_, PhaseKind::kWait);
    return std::forward<F>(f)();
  }
  template <class F>
  decltype(auto) h2d(F&& f) {
    Phase p(*this, h2d_s_, PhaseKind::kH2d);
    return std::forward<F>(f)();
  }
  template <class F>
  decltype(auto) compute(F&& f) {
    Phase p(*this, compute_s_, PhaseKind::kCompute);
    return std::forward<F>(f)();
  }
  // The iteration's loss, resolved at the end of the observation (one device sync).
  void set_loss(std::function<double()> resolve) { loss_ = std::move(resolve); }

  // The host's time in each phase (the device's, when timed by a DeviceTimeline, is in LoopResult).
  double wait_s() const { return wait_s_; }
  double h2d_s() const { return h2d_s_; }
  double compute_s() const { return compute_s_; }
  Clock::time_point start() const { return start_; }

 private:
  friend class TrainLoop;
  struct Phase {
    Phase(Iteration& it, double& slot, PhaseKind kind)
        : it_(it), slot_(slot), kind_(kind), nvtx_(nvtx::enabled()), t0_(it.now_()) {
      if (nvtx_) nvtx::push(phase_name(kind_));
      if (it_.timeline_) it_.timeline_->begin(kind_);
    }
    ~Phase() {
      if (it_.timeline_) it_.timeline_->end(kind_);
      if (it_.phase_sync_) it_.phase_sync_();
      slot_ += std::chrono::duration<double>(it_.now_() - t0_).count();
      if (nvtx_) nvtx::pop();
    }
    static const char* phase_name(PhaseKind k) {
      return k == PhaseKind::kWait ? "wait" : k == PhaseKind::kH2d ? "h2d" : "compute";
    }
    Iteration& it_;
    double& slot_;
    PhaseKind kind_;
    bool nvtx_;  // an NVTX range around the phase (--nvtx)
    Clock::time_point t0_;
  };
  NowFn now_;
  Clock::time_point start_;
  double wait_s_ = 0.0;
  double h2d_s_ = 0.0;
  double compute_s_ = 0.0;
  std::function<double()> loss_;
  std::function<void()> phase_sync_;
  DeviceTimeline* timeline_ = nullptr;  // set on the kept iterations when the loop has one
};

// Thrown when a loss turns NaN or infinite; the run ends as failed.
class NonFiniteLoss : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The process's CPU clock (core/process.h); tests inject a fake one.
using CpuNowFn = ProcessCpu (*)();
struct LoopConfig {
  int repeat = 1;
  int number = 1;  // ignored when min_time > 0 (calibrated instead)
  // > 0: calibrate `number` first so one observation lasts >= min_time seconds
  // (calibration.h); the probe iterations are untimed warm-up before the first
  // observation, counted in LoopResult::iterations but in no statistics. Each
  // warm-up observation then re-estimates the number from its own time, so the
  // kept observations use the estimate of the warmest run-in.
  double min_time = 0;
  int warmup = 0;            // observations (and their iterations) dropped
  Chrono::SyncHook sync;     // device synchronisation at train-stage edges
  bool sync_phases = false;  // also synchronise at each phase edge (exact per-phase device time)
  // When set (a GPU's events), the kept iterations' wait/h2d/compute statistics
  // are its device times, read after the sync that ends each observation
  // (`sync` must be set); the host's phase times are then not used.
  std::shared_ptr<DeviceTimeline> device_timeline;
  std::ostream* progress = nullptr;  // where progress lines go (nullptr: none)
  bool progress_tty = false;
  // Called after every iteration with its index (0-based over the whole run).
  std::function<void(long, const Iteration&)> on_iteration;
  // Polled once per iteration; returns a signal number to stop (0: go on).
  std::function<int()> interrupted;
  // The clock of the train stage and the phases; tests inject a fake one.
  NowFn now = &steady_now;
  // The process's CPU clock, read at the edges of every kept observation; tests inject a fake one.
  CpuNowFn cpu_now = &process_cpu_now;
};

struct LoopResult {
  Chrono chrono;                                  // the "train" stage (one observation per repeat)
  StatAccumulator wait, h2d, compute, iteration;  // per iteration of the kept observations
  std::string phase_clock = "host";               // "host", or "device" when a DeviceTimeline timed the phases
  std::vector<double> batch_loss;                 // the last 100 iteration losses
  std::vector<double> epoch_loss;                 // mean loss of each observation
  std::vector<double> observations;               // seconds of every train observation, warm-up included
  long iterations = 0;                            // every iteration run, probe and warm-up included
  int number = 0;                                 // iterations per observation, as used
  std::optional<Calibration> calibration;         // when LoopConfig::min_time > 0
  int warmup = 0;                                 // observations dropped
  long warmup_iterations = 0;                     // iterations of the dropped observations
  ProcessCpu kept_cpu;                            // the process's CPU time during the kept observations
                                                  // (host_busy_s: the machine's, when every edge read it)

  // The observations after the warm-up.
  std::span<const double> kept_observations() const;

  // The report's stall block: {wait, h2d, compute, iteration: stats, stall_pct, warmup_iterations, phase_clock}.
  StallPhases phases() const;
  // sum(wait) / sum(wait + h2d + compute) * 100 over the kept iterations (NaN when none).
  double stall_pct() const;
};

class TrainLoop {
 public:
  explicit TrainLoop(LoopConfig config) : config_(std::move(config)) {}
  // Calls `step` repeat * number times (after the calibration probe when
  // config.min_time > 0). Throws NonFiniteLoss or Interrupted; any exception
  // from `step` propagates. `result` keeps what was measured so far.
  void run(const std::function<void(Iteration&)>& step, LoopResult& result);

 private:
  // One iteration, outside or inside a timed observation.
  void iterate(const std::function<void(Iteration&)>& step, LoopResult& result, bool timed,
               std::vector<std::function<double()>>& pending);
  // The calibration probe (warm-up): sets result.calibration and config_.number.
  void calibrate(const std::function<void(Iteration&)>& step, LoopResult& result);
  // One kept iteration's {wait, h2d, compute} seconds (the host's, or a DeviceTimeline's) into the statistics.
  static void add_phases(const std::array<double, 3>& phases, LoopResult& result);
  // A warm-up observation of `seconds` re-estimates the number (under --min-time).
  void refine(Calibration& c, double seconds, LoopResult& result);

  LoopConfig config_;
};

}  // namespace mlbench::core
