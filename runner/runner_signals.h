// The runner's signals (Ctrl-C, SIGTERM, SIGHUP, SIGCHLD), shared by the launchers:
// blocked in the runner and taken in Launcher::wait(), in the one thread, never in a
// handler. Children get an empty mask back before exec (core::Process).
#pragma once

namespace mlbench::runner {

// Blocks the runner's signals (SIGCHLD kept pending, not discarded).
void block_runner_signals();

// Waits up to `seconds` for one of them: SIGINT, SIGTERM or SIGHUP when one came,
// else 0 (a child ended, or the time is up).
int wait_for_runner_signal(double seconds);

}  // namespace mlbench::runner
