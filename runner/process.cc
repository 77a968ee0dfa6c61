// Process launching through Boost.Process (see process.h).
#include "process.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>

#include "cgroup/slice.h"

namespace mlbench::runner {

namespace bp = boost::process;

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

int wait_runner_signal(double seconds) {
  const sigset_t set = runner_signals();
  if (seconds < 0) seconds = 0;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - std::floor(seconds)) * 1e9);
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

void signal_group(pid_t pgid, int sig) {
  if (pgid > 0) ::killpg(pgid, sig);
}

pid_t launch(const LaunchSpec& spec, std::string& error) {
  FILE* log = std::fopen(spec.log_path.c_str(), "w");
  if (!log) {
    error = spec.log_path + ": cannot open log: " + std::strerror(errno);
    return -1;
  }
  std::fputs(spec.log_header.c_str(), log);
  std::fflush(log);
  bp::environment env = boost::this_process::environment();
  for (const auto& [k, v] : spec.env) env[k] = v;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int c : spec.cpus) CPU_SET(c, &mask);
  const bool set_affinity = !spec.cpus.empty();
  const std::vector<std::string>& procs = spec.procs_files;
  pid_t pid = -1;
  try {
    // Runs in the child between fork and exec: async-signal-safe calls only.
    auto setup = [&](auto& exec) {
      ::setpgid(0, 0);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGCHLD, SIG_DFL);
      if (!procs.empty()) {
        if (int err = cgroup::attach_self_to(procs, ::getpid()); err != 0) {
          exec.set_error(std::error_code(err, std::system_category()), "cannot join the instance's cgroup");
          return;
        }
      }
      if (set_affinity && ::sched_setaffinity(0, sizeof(mask), &mask) != 0) {
        exec.set_error(std::error_code(errno, std::system_category()), "cannot set CPU affinity");
      }
    };
    bp::child child(bp::exe = spec.executable, bp::args = spec.argv, env, bp::std_in < bp::null,
                    (bp::std_out & bp::std_err) > log, bp::extend::on_exec_setup = setup);
    pid = child.id();
    // Also from the parent, so a signal sent right after launch reaches the group.
    ::setpgid(pid, pid);
    child.detach();  // the runner reaps with waitpid itself
  } catch (const std::exception& e) {
    error = e.what();
    pid = -1;
  }
  std::fclose(log);
  return pid;
}

}  // namespace mlbench::runner
