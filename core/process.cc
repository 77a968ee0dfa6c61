// Child processes on Boost.Process (see process.h).
#include "process.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>

namespace mlbench::core {

namespace bp = boost::process;

namespace {

ExitStatus exit_status(int status, const rusage& usage) {
  ExitStatus s;
  s.exited = WIFEXITED(status);
  s.code = s.exited ? WEXITSTATUS(status) : 0;
  s.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  s.usage = usage;
  return s;
}

bp::environment child_environment(const std::optional<Environment>& env) {
  if (!env) return boost::this_process::environment();
  bp::environment e;
  for (const auto& [k, v] : *env) e[k] = v;
  return e;
}

// Where stdout+stderr go: a FILE* for File and Capture (closed by the caller), else null.
FILE* open_output(const ProcessSpec& spec) {
  FILE* f = nullptr;
  if (spec.output == Output::File) {
    f = std::fopen(spec.log_path.c_str(), "w");
    if (f == nullptr) throw ProcessError(spec.log_path + ": cannot open log: " + std::strerror(errno));
    std::fputs(spec.log_header.c_str(), f);
    std::fflush(f);
  } else if (spec.output == Output::Capture) {
    f = std::tmpfile();
    if (f == nullptr) throw ProcessError(std::string("cannot create a file for the output: ") + std::strerror(errno));
  }
  return f;
}

// Forks and execs with `io...` as the redirections; returns the pid.
template <typename... Io>
pid_t spawn(const ProcessSpec& spec, Io&&... io) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int c : spec.cpus) CPU_SET(c, &mask);
  const pid_t parent = ::getpid();
  // Set by the child when child_setup fails: Boost.Process passes the child's error
  // code back reliably but not always its message (it came back empty in a CI run),
  // so the parent names the failed step itself.
  void* shared = ::mmap(nullptr, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw ProcessError(std::string("cannot map a flag for the child: ") + std::strerror(errno));
  std::unique_ptr<void, void (*)(void*)> unmap(shared, [](void* p) { ::munmap(p, sizeof(int)); });
  volatile int* setup_failed = static_cast<volatile int*>(shared);
  *setup_failed = 0;
  // Runs in the child between fork and exec: async-signal-safe calls only.
  auto setup = [&](auto& exec) {
    ::setpgid(0, 0);
    // Dies with the thread that started it; and at once if the parent is already gone.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::raise(SIGKILL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGCHLD, SIG_DFL);
    if (spec.child_setup) {
      if (const int err = spec.child_setup(); err != 0) {
        *setup_failed = 1;
        exec.set_error(std::error_code(err, std::system_category()), spec.child_setup_what);
        return;
      }
    }
    if (!spec.cpus.empty() && ::sched_setaffinity(0, sizeof(mask), &mask) != 0) {
      exec.set_error(std::error_code(errno, std::system_category()), "cannot set CPU affinity");
    }
  };
  std::optional<bp::child> started;
  try {
    started.emplace(bp::exe = spec.executable, bp::args = spec.args, child_environment(spec.env),
                    bp::start_dir = spec.working_dir.empty() ? std::string(".") : spec.working_dir,
                    bp::std_in < bp::null, std::forward<Io>(io)..., bp::extend::on_exec_setup = setup);
  } catch (const std::system_error& e) {
    if (*setup_failed != 0) throw ProcessError(spec.child_setup_what + ": " + e.code().message());
    throw;
  }
  bp::child& child = *started;
  const pid_t pid = child.id();
  // Also from the parent, so a signal sent right after the start reaches the group.
  ::setpgid(pid, pid);
  child.detach();  // reaped by Process with wait4, which also gives its rusage
  return pid;
}

// The user and system CPU seconds of a resource usage.
ProcessCpu cpu_of(const rusage& u) {
  const auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return {s(u.ru_utime), s(u.ru_stime), std::nullopt};
}

}  // namespace

double cpu_seconds(const rusage& usage) {
  return cpu_of(usage).total();
}

std::optional<double> host_busy_seconds(const std::string& proc_stat, double ticks_per_second) {
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice": the first line.
  if (proc_stat.rfind("cpu ", 0) != 0 || !(ticks_per_second > 0)) return std::nullopt;
  unsigned long long v[7] = {};
  if (std::sscanf(proc_stat.c_str(), "cpu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                  &v[6]) != 7) {
    return std::nullopt;
  }
  return static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6]) / ticks_per_second;
}

std::int64_t this_thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

ProcessCpu process_cpu_now() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  ProcessCpu c = cpu_of(u);
  // The first line is all that is needed.
  if (FILE* f = std::fopen("/proc/stat", "re")) {
    char line[256] = {};
    if (std::fgets(line, sizeof line, f)) {
      c.host_busy_s = host_busy_seconds(line, static_cast<double>(::sysconf(_SC_CLK_TCK)));
    }
    std::fclose(f);
  }
  return c;
}

Process::Process(const ProcessSpec& spec) {
  FILE* out = open_output(spec);
  try {
    if (spec.output == Output::Inherit) {
      pid_ = spawn(spec);
    } else if (spec.output == Output::Null) {
      pid_ = spawn(spec, (bp::std_out & bp::std_err) > bp::null);
    } else {
      pid_ = spawn(spec, (bp::std_out & bp::std_err) > out);
    }
  } catch (const std::exception& e) {
    if (out != nullptr) std::fclose(out);
    throw ProcessError(spec.executable + ": " + e.what());
  }
  if (spec.output == Output::Capture) capture_fd_ = ::dup(::fileno(out));
  if (out != nullptr) std::fclose(out);
}

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), status_(std::move(other.status_)),
      capture_fd_(std::exchange(other.capture_fd_, -1)) {}

Process::~Process() {
  if (pid_ > 0 && !status_) {
    ::killpg(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (capture_fd_ >= 0) ::close(capture_fd_);
}

std::optional<ExitStatus> Process::try_wait() {
  if (status_ || pid_ <= 0) return status_;
  int status = 0;
  rusage usage{};
  const pid_t r = ::wait4(pid_, &status, WNOHANG, &usage);
  if (r == pid_) status_ = exit_status(status, usage);
  return status_;
}

std::optional<ExitStatus> Process::wait_for(double seconds) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  // Polls with a growing pause (1 ms to 20 ms): short children end promptly, long ones cost nothing.
  auto pause = std::chrono::milliseconds(1);
  while (!try_wait()) {
    if (seconds >= 0 && Clock::now() >= deadline) return std::nullopt;
    auto step = std::chrono::duration_cast<Clock::duration>(pause);
    if (seconds >= 0) step = std::min(step, deadline - Clock::now());
    std::this_thread::sleep_for(std::max(step, Clock::duration::zero()));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  return status_;
}

void Process::signal_group(int sig) const {
  if (!status_) signal_process_group(pid_, sig);
}

ExitStatus Process::stop(double grace) {
  signal_group(SIGTERM);
  if (auto s = wait_for(grace)) return *s;
  signal_group(SIGKILL);
  return wait();
}

std::string Process::output() const {
  std::string text;
  if (capture_fd_ < 0) return text;
  char buf[4096];
  off_t at = 0;
  for (ssize_t n; (n = ::pread(capture_fd_, buf, sizeof buf, at)) > 0; at += n) text.append(buf, static_cast<std::size_t>(n));
  return text;
}

CommandResult run_captured(ProcessSpec spec, double timeout) {
  spec.output = Output::Capture;
  Process p(spec);
  CommandResult r;
  if (auto s = p.wait_for(timeout)) {
    r.status = *s;
  } else {
    r.timed_out = true;
    r.status = p.stop(1.0);
  }
  r.output = p.output();
  return r;
}

void signal_process_group(pid_t pgid, int sig) {
  if (pgid > 0) ::killpg(pgid, sig);
}

}  // namespace mlbench::core
