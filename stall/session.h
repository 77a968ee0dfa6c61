// mlbench-stall's measuring session: the dataset's raw read rates, the plan's runs (round after
// round), the optional runs (K jobs sharing the device or the CPUs, the peer runs, mlbench's own
// loader under --exec), then the analysis and its files (docs/stall.md). Each run is recorded in
// OUT/runs.json as it ends, so a later failure keeps what was measured.
#pragma once

#include "command_line.h"

namespace mlbench::stall {

// Runs the analysis the checked options ask for. Exit status: 0 done, 1 a run or measurement
// failed, 2 a bad dataset or --out, 128 + signal when interrupted.
int run_session(const StallOptions& options);

}  // namespace mlbench::stall
