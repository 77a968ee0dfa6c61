// The runner's blocked signals (see runner_signals.h).
#include "runner_signals.h"

#include <signal.h>

#include <cmath>
#include <ctime>
#include <initializer_list>

namespace mlbench::runner {

namespace {

sigset_t runner_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  return set;
}
extern "C" void ignore_signal(int) {}

}  // namespace

void block_runner_signals() {
  // SIGCHLD must not be discarded while blocked: give it a handler that is never run.
  struct sigaction sa {};
  sa.sa_handler = ignore_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, nullptr);
  const sigset_t set = runner_signals();
  sigprocmask(SIG_BLOCK, &set, nullptr);
}

int wait_for_runner_signal(double seconds) {
  const sigset_t set = runner_signals();
  if (seconds < 0) seconds = 0;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - std::floor(seconds)) * 1e9);
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 && sig != SIGCHLD ? sig : 0;
}

}  // namespace mlbench::runner
