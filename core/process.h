// Child processes, the one way mlbench starts them (the runner's instances, the
// analyzer's runs, the tests' commands), on Boost.Process. Every child:
//  - runs in its own process group (its pid is the group id), so signalling the
//    group reaches everything it started;
//  - dies with its parent: PR_SET_PDEATHSIG(SIGKILL) is set between fork and exec.
//    Linux sends it when the *thread* that started the child exits, so start
//    children from a thread that outlives them (the main thread, as mlbench does);
//  - starts with an empty signal mask and stdin from /dev/null.
// Waiting reaps only this child (never waitpid(-1)), so several facilities can
// live in one process.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "environment.h"

namespace mlbench::core {

// A child that could not be started; what() is one line naming the executable.
class ProcessError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where the child's stdout and stderr (together) go.
enum class Output {
  Inherit,  // the parent's
  Null,     // /dev/null
  File,     // ProcessSpec::log_path, truncated; ProcessSpec::log_header written first
  Capture,  // kept by the Process; read with Process::output() after it ended
};

struct ProcessSpec {
  std::string executable;          // a path (not looked up on PATH)
  std::vector<std::string> args;   // after the executable
  std::optional<Environment> env;  // the whole environment; nullopt: the parent's
  std::string working_dir;         // "" = the parent's
  Output output = Output::Inherit;
  std::string log_path;    // Output::File
  std::string log_header;  // Output::File
  std::vector<int> cpus;   // CPU affinity of the child (empty: inherit)
  // Runs in the child after fork, before exec (e.g. joining a cgroup): async-signal-safe
  // calls only; a non-zero errno fails the start with `child_setup_what`.
  std::function<int()> child_setup;
  std::string child_setup_what = "child set-up failed";
};

// User + system CPU seconds of a resource usage (a child's from wait4, or this process's).
double cpu_seconds(const rusage& usage);

// This process's CPU time so far, every thread's (getrusage(RUSAGE_SELF)), in seconds; and,
// where /proc/stat can be read, the whole machine's busy CPU seconds so far (every process's and
// the kernel's: the aggregate "cpu" line's user + nice + system + irq + softirq, in USER_HZ
// ticks), so that a window's other CPU (the machine's less this process's) can be told: a
// server on the same machine answering this process's requests.
struct ProcessCpu {
  double user_s = 0;
  double sys_s = 0;
  std::optional<double> host_busy_s;
  double total() const { return user_s + sys_s; }
};
ProcessCpu process_cpu_now();
// This thread's CPU time so far (CLOCK_THREAD_CPUTIME_ID), in nanoseconds.
std::int64_t this_thread_cpu_ns();
// The machine's busy CPU seconds from /proc/stat's text (its aggregate "cpu" line); nullopt when
// the line is missing or malformed.
std::optional<double> host_busy_seconds(const std::string& proc_stat, double ticks_per_second);

// How a child ended.
struct ExitStatus {
  bool exited = false;  // normal exit with `code`; else killed by `signal`
  int code = 0;
  int signal = 0;
  rusage usage{};  // the child's own (and its reaped children's) resource usage

  // Exit code, or 128 + signal as a shell reports it.
  int shell_code() const { return exited ? code : 128 + signal; }
  double cpu_seconds() const { return core::cpu_seconds(usage); }
};

class Process {
 public:
  // Starts the child; throws ProcessError when it cannot (no such file, log not writable,
  // child_setup failed).
  explicit Process(const ProcessSpec& spec);
  // A child still running is killed (its whole group) and reaped.
  ~Process();
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) = delete;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // The child's pid, also its process group id.
  pid_t pid() const { return pid_; }
  // Reaps the child if it has ended; never blocks.
  std::optional<ExitStatus> try_wait();
  // Waits up to `seconds` (< 0: forever) for the child to end.
  std::optional<ExitStatus> wait_for(double seconds);
  ExitStatus wait() { return *wait_for(-1); }
  // Sends `sig` to the child's process group (no-op once it has been reaped).
  void signal_group(int sig) const;
  // SIGTERM to the group, then SIGKILL after `grace` seconds; waits for the end.
  ExitStatus stop(double grace);
  // Output::Capture: everything the child wrote (call after it ended).
  std::string output() const;

 private:
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
  int capture_fd_ = -1;
};

// Convenience: runs a command to its end with output captured; after `timeout`
// seconds (< 0: none) the group is stopped (SIGTERM, SIGKILL 1 s later).
struct CommandResult {
  ExitStatus status;
  bool timed_out = false;
  std::string output;  // stdout and stderr together
};
CommandResult run_captured(ProcessSpec spec, double timeout = -1);

// Sends `sig` to the process group `pgid`; groups that are gone are ignored.
void signal_process_group(pid_t pgid, int sig);

}  // namespace mlbench::core
