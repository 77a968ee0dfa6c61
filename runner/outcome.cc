// Instance outcomes and status lines (see outcome.h).
#include "outcome.h"

#include <cmath>

#include <fmt/format.h>

#include "core/progress.h"

namespace mlbench::runner {

std::string timeout_reason(double seconds) { return fmt::format("timeout {:g}s", seconds); }

Outcome decide_outcome(const EndFacts& f) {
  if (!f.setup_error.empty()) return {false, f.setup_error};
  if (f.launch_failed) return {false, "launch failed: " + f.launch_error};
  // Under Slurm the step's state leads, with the runner's cause beside it. Slurm's own
  // causes come first: they ended the step whatever the runner asked of it afterwards.
  const bool slurm = !f.state.empty();
  for (const char* own : {"OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED"}) {
    if (f.state == own) return {false, f.state};
  }
  if (f.interrupted) return {false, slurm ? "CANCELLED (interrupted)" : "interrupted"};
  if (f.timed_out) return {false, slurm ? "TIMEOUT (" + timeout_reason(f.timeout) + ")" : timeout_reason(f.timeout)};
  if (f.oom_kills > 0 || f.state == "OUT_OF_MEMORY") return {false, slurm ? "OUT_OF_MEMORY" : "oom"};
  // Ended by Slurm (scancel, node failure, its own --time, preemption), whatever the exit.
  if (slurm && f.state != "COMPLETED" && f.state != "FAILED") return {false, f.state};
  if (!f.exited) return {false, fmt::format("signal {}", f.signal)};
  if (f.exit_code != 0) {
    // A benchmark that failed on its own (NaN loss, bad data) says why in its report: show that, not only the code.
    if (f.has_report && !f.report_reason.empty())
      return {false, fmt::format("exit {}: {}", f.exit_code, f.report_reason)};
    return {false, fmt::format("exit {}", f.exit_code)};
  }
  if (!f.has_report) return {false, "no report"};
  if (!f.report_completed) return {false, f.report_reason.empty() ? "completed: false" : f.report_reason};
  return {true, ""};
}

namespace {
int width_of(int total) { return std::max(2, static_cast<int>(std::to_string(total).size())); }
}  // namespace

std::string summary_line(int index, int total, int failed, int instances, double seconds, const std::string& title,
                         bool skipped) {
  const int w = width_of(total);
  const int wi = width_of(instances);
  const std::string counts = failed > 0 ? fmt::format("[{:>{}}/{:>{}}]", failed, wi, instances, wi)
                                        : fmt::format("[{}/{}]", std::string(wi, ' '), std::string(wi, ' '));
  const char* status = failed > 0 ? "FAILED" : "PASSED";
  return fmt::format("[{:>{}}/{:>{}}]{} {} | {:8.2f} MIN | {}{}", index, w, total, w, counts, status, seconds / 60.0,
                     title, skipped ? " (resumed)" : "");
}

std::string total_line(double seconds) { return fmt::format("Total Time {:8.2f} s", seconds); }

std::string status_line(int index, int total, const std::string& title, int running, int passed, int failed,
                        double step_elapsed, double eta) {
  const int w = width_of(total);
  const std::string eta_text = std::isfinite(eta) ? core::format_duration(eta) : "?";
  return fmt::format("[{:>{}}/{:>{}}] {} | {} running, {} passed, {} failed | {} | ETA {}", index, w, total, w, title,
                     running, passed, failed, core::format_duration(step_elapsed), eta_text);
}

}  // namespace mlbench::runner
