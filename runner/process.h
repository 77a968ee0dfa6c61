// Launching one benchmark instance (Boost.Process): own process group, its
// cgroup joined and CPU affinity set in the child before exec, stdout+stderr
// to its log, stdin from /dev/null; and signalling its whole group.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace mlbench::runner {

struct LaunchSpec {
  std::string executable;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // set on top of the runner's environment
  std::string log_path;                    // truncated; `log_header` written first
  std::string log_header;
  std::vector<int> cpus;                   // sched_setaffinity (empty: inherit)
  std::vector<std::string> procs_files;    // cgroup files the child writes its pid into
};

// Starts the process; returns its pid (also its process group id), or -1 with `error` set.
pid_t launch(const LaunchSpec& spec, std::string& error);

// Sends `sig` to the process group `pgid`; ignores groups that are gone.
void signal_group(pid_t pgid, int sig);

// Signals the runner waits on (SIGCHLD, SIGINT, SIGTERM, SIGHUP): blocked at start so
// they are taken with sigtimedwait in the one thread, never in a handler. Children
// get an empty mask back before exec.
void block_runner_signals();
// Waits up to `seconds` for one of them; returns the signal or 0 on timeout.
int wait_runner_signal(double seconds);

}  // namespace mlbench::runner
