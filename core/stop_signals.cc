// The stop-signal handler shared by the benchmarks, datagen and mlbench-stall.
#include "core/stop_signals.h"

#include <csignal>

#include <fmt/format.h>

namespace mlbench::core {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }
}  // namespace

StopSignals::StopSignals(Calls calls) {
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = calls == Calls::kRestart ? SA_RESTART : 0;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &sa, &old_[i]);
}

StopSignals::~StopSignals() {
  for (std::size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &old_[i], nullptr);
}

int stop_signal() { return g_stop_signal; }

Interrupted::Interrupted(int signal)
    : std::runtime_error(signal == SIGINT ? "interrupted" : fmt::format("terminated by signal {}", signal)),
      signal_(signal) {}

}  // namespace mlbench::core
