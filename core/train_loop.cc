#include "train_loop.h"

#include "report.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "progress.h"

namespace mlbench::core {

constexpr std::size_t kBatchLossKept = 100;

double LoopResult::stall_pct() const {
  const double total = iteration.sum();
  return total > 0.0 ? 100.0 * wait.sum() / total : std::nan("");
}

StallPhases LoopResult::phases() const {
  const double pct = stall_pct();
  return {.wait = stats_of(wait),
          .h2d = stats_of(h2d),
          .compute = stats_of(compute),
          .iteration = stats_of(iteration),
          .stall_pct = std::isfinite(pct) ? std::optional<double>(pct) : std::nullopt,
          .warmup_iterations = warmup_iterations,
          .phase_clock = phase_clock};
}

std::span<const double> LoopResult::kept_observations() const {
  const std::size_t drop = std::min(observations.size(), static_cast<std::size_t>(std::max(warmup, 0)));
  return std::span<const double>(observations).subspan(drop);
}

namespace {
// Resolves the losses of one observation (repeat >= 0) or probe round (repeat < 0);
// throws NonFiniteLoss. Returns their sum.
double resolve_losses(const std::vector<std::function<double()>>& pending, LoopResult& result, int repeat) {
  double sum = 0.0;
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const double loss = pending[i]();
    if (!std::isfinite(loss)) {
      throw NonFiniteLoss(repeat < 0 ? fmt::format("loss is {} in the --min-time probe iteration {}", loss, i)
                                     : fmt::format("loss is {} at repeat {} iteration {}", loss, repeat, i));
    }
    sum += loss;
    if (repeat >= 0) result.batch_loss.push_back(loss);
  }
  return sum;
}
}  // namespace

void TrainLoop::iterate(const std::function<void(Iteration&)>& step, LoopResult& result, bool timed,
                        std::vector<std::function<double()>>& pending) {
  if (config_.interrupted) {
    if (const int sig = config_.interrupted()) throw Interrupted(sig);
  }
  Iteration it(config_.now);
  if (config_.sync_phases) it.phase_sync_ = config_.sync;
  DeviceTimeline* timeline = timed ? config_.device_timeline.get() : nullptr;
  it.timeline_ = timeline;
  step(it);
  if (timeline) {
    timeline->end_iteration();  // its phases are added after the observation's closing sync
  } else if (timed) {
    add_phases({it.wait_s(), it.h2d_s(), it.compute_s()}, result);
  }
  if (config_.on_iteration) config_.on_iteration(result.iterations, it);
  ++result.iterations;
  if (it.loss_) pending.push_back(std::move(it.loss_));
}

void TrainLoop::add_phases(const std::array<double, 3>& p, LoopResult& result) {
  result.wait.add(p[0]);
  result.h2d.add(p[1]);
  result.compute.add(p[2]);
  result.iteration.add(p[0] + p[1] + p[2]);
}

void TrainLoop::calibrate(const std::function<void(Iteration&)>& step, LoopResult& result) {
  std::vector<std::function<double()>> pending;
  const Calibration c = calibrate_number(config_.min_time, [&](int n) {
    pending.clear();
    if (config_.sync) config_.sync();
    const SteadyTime t0 = config_.now();
    for (int i = 0; i < n; ++i) iterate(step, result, false, pending);
    if (config_.sync) config_.sync();
    const double seconds = std::chrono::duration<double>(config_.now() - t0).count();
    resolve_losses(pending, result, -1);
    return seconds;
  });
  result.calibration = c;
  config_.number = c.number;
}

void TrainLoop::refine(Calibration& c, double seconds, LoopResult& result) {
  c.seconds_per_iteration = seconds / config_.number;
  c.number = number_for(c.target_s, c.seconds_per_iteration);
  ++c.refinements;
  config_.number = c.number;
  result.number = c.number;
}

void TrainLoop::run(const std::function<void(Iteration&)>& step, LoopResult& result) {
  result.number = config_.number;
  result.warmup = config_.warmup;
  if (config_.min_time > 0) {
    calibrate(step, result);
    result.number = config_.number;
  }
  result.chrono = Chrono(static_cast<std::size_t>(config_.warmup), config_.sync, config_.now);
  // Warm-up iterations are counted, not added: under --min-time their number may differ
  // from the kept observations' (below).
  result.wait = StatAccumulator();
  result.h2d = StatAccumulator();
  result.compute = StatAccumulator();
  result.iteration = StatAccumulator();
  result.kept_cpu = {};
  bool host_busy_known = true;  // every kept observation's edges read the machine's CPU time
  result.phase_clock = config_.device_timeline ? "device" : "host";
  std::unique_ptr<ProgressPrinter> progress;
  if (config_.progress)
    progress = std::make_unique<ProgressPrinter>(*config_.progress, config_.progress_tty, config_.repeat);

  std::vector<std::function<double()>> pending;
  pending.reserve(static_cast<std::size_t>(config_.number));
  for (int r = 0; r < config_.repeat; ++r) {
    pending.clear();
    const bool warm = r < config_.warmup;
    double seconds = 0;
    {
      const ProcessCpu cpu0 = warm ? ProcessCpu{} : config_.cpu_now();
      auto train = result.chrono.time("train");
      for (int n = 0; n < config_.number; ++n) {
        iterate(step, result, !warm, pending);
        if (progress) progress->update(r, std::nullopt, false);
      }
      seconds = train.stop();  // synchronises the device
      result.observations.push_back(seconds);
      if (!warm && config_.device_timeline) {
        for (const auto& p : config_.device_timeline->take()) add_phases(p, result);
      }
      if (!warm) {
        const ProcessCpu cpu1 = config_.cpu_now();
        result.kept_cpu.user_s += cpu1.user_s - cpu0.user_s;
        result.kept_cpu.sys_s += cpu1.sys_s - cpu0.sys_s;
        host_busy_known = host_busy_known && cpu0.host_busy_s && cpu1.host_busy_s;
        result.kept_cpu.host_busy_s =
            host_busy_known
                ? std::optional(result.kept_cpu.host_busy_s.value_or(0) + *cpu1.host_busy_s - *cpu0.host_busy_s)
                : std::nullopt;
      }
    }
    if (warm) {
      result.warmup_iterations += config_.number;
      // Under --min-time each warm-up observation refines the number: the probe runs
      // first, when a pipeline may still be filling and caches are cold.
      if (result.calibration && seconds > 0) refine(*result.calibration, seconds, result);
    }
    const double sum = resolve_losses(pending, result, r);
    if (result.batch_loss.size() > kBatchLossKept) {
      result.batch_loss.erase(result.batch_loss.begin(),
                              result.batch_loss.end() - static_cast<std::ptrdiff_t>(kBatchLossKept));
    }
    std::optional<double> epoch;
    if (!pending.empty()) {
      epoch = sum / static_cast<double>(pending.size());
      result.epoch_loss.push_back(*epoch);
    }
    if (progress) progress->update(r + 1, epoch, true);
  }
  if (progress) progress->finish();
}

}  // namespace mlbench::core
