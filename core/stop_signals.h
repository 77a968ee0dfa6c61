// core/stop_signals.h: SIGINT, SIGTERM and SIGHUP recorded instead of ending the
// process, so that the code running stops at its next check and leaves nothing
// half-written behind: the benchmarks' training loop (a FAIL report), datagen (its
// temporary folder removed) and mlbench-stall (the signal forwarded to the benchmark).
#pragma once

#include <signal.h>

#include <iterator>
#include <stdexcept>

namespace mlbench::core {

// While it lives, the stop signals set stop_signal(); the previous handlers come back
// when it goes. One at a time per process (the newest one resets stop_signal() to 0).
class StopSignals {
 public:
  // kRestart: a system call the signal interrupts is restarted (SA_RESTART), for code
  // that checks stop_signal() between items and whose writes in flight should finish;
  // kInterrupt: it fails with EINTR, so a blocking wait returns at once.
  enum class Calls { kRestart, kInterrupt };

  explicit StopSignals(Calls calls);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[std::size(kSignals)] {};
};

// The last stop signal caught since the newest StopSignals was made (0: none).
int stop_signal();

// Thrown by code that stopped on a stop signal; the exit status is 128 + signal().
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal);
  int signal() const { return signal_; }

 private:
  int signal_;
};

}  // namespace mlbench::core
