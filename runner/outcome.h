// What became of an instance (pass, or the FAIL reason the issue lists) and the
// lines the user reads: summary.txt's Mila status lines and the live status line.
// Pure: facts in, text out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mlbench::runner {

// Everything known about an ended instance.
struct EndFacts {
  bool launch_failed = false;
  std::string launch_error;
  bool exited = false;  // normal exit (else killed by `signal`)
  int exit_code = 0;
  int signal = 0;
  bool timed_out = false;    // the runner killed it at its timeout
  double timeout = 0;        // seconds
  bool interrupted = false;  // the runner was interrupted (Ctrl-C) while it ran
  std::uint64_t oom_kills = 0;  // from its cgroup
  bool has_report = false;
  bool report_completed = false;
  std::string report_reason;   // the benchmark's own reason in a FAIL report
  std::string setup_error;     // e.g. a dataset that could not be made (instance not launched)
  std::string state;           // Slurm's job-step state ("" from the local launcher)
};

struct Outcome {
  bool passed = false;
  std::string reason;  // "" when passed
};

// Precedence: set-up error, launch error, interrupted, timeout, oom, signal, exit N
// ("exit N: <the report's reason>" when the benchmark wrote one), no report, the
// report's own `completed: false` reason. Under Slurm (`state` set) the reason names the
// step's state: OUT_OF_MEMORY, NODE_FAIL and PREEMPTED first (also when the runner was
// interrupted or timed the step out meanwhile), then "CANCELLED (interrupted)",
// "TIMEOUT (timeout 2s)", and any other state Slurm ended it in (CANCELLED, TIMEOUT) as it is.
Outcome decide_outcome(const EndFacts& f);

// "timeout 1800s", "timeout 2.5s"
std::string timeout_reason(double seconds);

// "[ 1/19][  /  ] PASSED |     0.27 MIN | loader" / "[ 2/19][ 1/ 2] FAILED |     0.93 MIN | loader"
// (second bracket: failed/instances of that step, blank when all passed; `skipped`:
// passed in an earlier run kept by --resume, the title gets " (resumed)").
std::string summary_line(int index, int total, int failed, int instances, double seconds, const std::string& title,
                         bool skipped = false);
// "Total Time  2817.82 s"
std::string total_line(double seconds);

// The live line: "[ 2/19] loader | 2 running, 0 passed, 0 failed | 12.3 s | ETA 4.56 min"
// (ETA of the whole pass from the steps done so far; "ETA ?" before the first ends).
std::string status_line(int index, int total, const std::string& title, int running, int passed, int failed,
                        double step_elapsed, double eta_seconds);

}  // namespace mlbench::runner
