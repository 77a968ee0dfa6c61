// Instances on this machine: core::Process in cgroup slices (see local_launcher.h).
#include "local_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <set>

#include "runner_signals.h"

namespace mlbench::runner {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;

namespace {

// The slice controllers a run's groups may sit in (v1; on v2 all name one directory).
constexpr const char* kControllers[] = {"cpuset", "cpu", "cpuacct", "memory", "blkio", "io"};

// Whether the runner of run `run_id` ("<timestamp>-<pid>") still runs: its pid is alive
// and is an mlbench-run (a reused pid is not). Names of another shape are left alone.
bool runner_alive(const std::string& run_id) {
  const auto dash = run_id.rfind('-');
  if (dash == std::string::npos || dash + 1 == run_id.size()) return true;
  const std::string pid = run_id.substr(dash + 1);
  if (pid.find_first_not_of("0123456789") != std::string::npos) return true;
  std::ifstream comm("/proc/" + pid + "/comm");
  std::string name;
  return std::getline(comm, name) && name.rfind("mlbench-run", 0) == 0;
}

// The sub-directories of `dir` (none when it is absent).
std::set<std::string> subdirectories(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec)) names.insert(e.path().filename().string());
  }
  return names;
}

core::ResourcesInfo rusage_resources(const core::ExitStatus& s) {
  core::ResourcesInfo r;
  r.source = "rusage";
  r.cpu_seconds = s.cpu_seconds();
  r.memory_peak_bytes = static_cast<std::int64_t>(s.usage.ru_maxrss) * 1024;
  r.bytes_read = static_cast<std::int64_t>(s.usage.ru_inblock) * 512;  // oom_kills: unknown outside a cgroup
  return r;
}

}  // namespace

LocalLauncher::LocalLauncher(bool use_cgroups, const std::vector<int>& cpus, const std::string& run_id) {
  block_runner_signals();
  if (use_cgroups) open_cgroups(cpus, run_id);
}

void LocalLauncher::open_cgroups(const std::vector<int>& cpus, const std::string& run_id) {
  std::string why;
  cg_ = cgroup::Hierarchy::open(&why);
  if (cg_) {
    parent_ = "mlbench/" + run_id;
    remove_stale_runs();
    try {
      std::error_code ec;
      if (!fs::exists(cg_->dir("cpuset", "mlbench"), ec)) cg_->create("mlbench", {cpus, {}, std::nullopt});
      cg_->create(parent_, {cpus, {}, std::nullopt});
      isolation_ = cg_->isolation();
    } catch (const std::exception& e) {
      why = e.what();
      cg_->remove(parent_);
      cg_.reset();
    }
  }
  if (!cg_)
    std::cerr << "mlbench-run: warning: no cgroups (" << why << "); confining instances with CPU affinity only"
              << std::endl;
}

// The directories of `group` in every slice controller that is mounted.
std::vector<fs::path> LocalLauncher::group_dirs(const std::string& group) const {
  std::set<fs::path> dirs;
  for (const char* c : kControllers) {
    try {
      dirs.insert(cg_->dir(c, group));
    } catch (const cgroup::CgroupError&) {  // controller not mounted
    }
  }
  return {dirs.begin(), dirs.end()};
}

// A runner that was SIGKILLed (or crashed) cannot remove its groups; its instances died
// with it (PR_SET_PDEATHSIG), anything they started may not have. So each run removes
// the groups of earlier runs whose runner is gone, killing what still runs in them.
void LocalLauncher::remove_stale_runs() {
  std::set<std::string> runs;
  for (const fs::path& d : group_dirs("mlbench")) runs.merge(subdirectories(d));
  for (const std::string& run : runs) {
    if (runner_alive(run)) continue;
    const std::string group = "mlbench/" + run;
    std::set<std::string> slices;
    for (const fs::path& d : group_dirs(group)) {
      for (const std::string& slice : subdirectories(d)) {
        slices.insert(slice);
        std::ifstream procs(d / slice / "cgroup.procs");
        for (pid_t pid; procs >> pid;) ::kill(pid, SIGKILL);
      }
    }
    bool removed = true;
    for (const std::string& slice : slices) removed = cg_->remove(group + "/" + slice) && removed;
    removed = cg_->remove(group) && removed;
    std::cerr << "mlbench-run: " << (removed ? "removed" : "warning: could not remove") << " cgroup " << group
              << " of an earlier run whose runner is gone" << std::endl;
  }
}

LocalLauncher::~LocalLauncher() {
  children_.clear();  // kills and reaps anything still running
  if (!cg_) return;
  cg_->remove(parent_);
  std::error_code ec;
  // Shared by concurrent runs: removed only when empty (rmdir fails on a busy one).
  for (const char* c : {"cpuset", "cpu", "cpuacct", "memory", "blkio"}) {
    try {
      fs::remove(cg_->dir(c, "mlbench"), ec);
    } catch (const cgroup::CgroupError&) {
    }
  }
}

std::optional<std::string> LocalLauncher::cgroup_parent() const {
  return cg_ ? std::optional<std::string>(parent_) : std::nullopt;
}

// Creates the request's slice and makes the child join it before exec; returns the group.
std::string LocalLauncher::make_slice(const LaunchRequest& request, core::ProcessSpec& spec) {
  if (!cg_ || request.cgroup.empty()) return "";
  const std::string group = parent_ + "/" + request.cgroup;
  try {
    cg_->create(group, {request.cpus, {}, request.memory_bytes});
  } catch (const cgroup::CgroupError&) {
    cg_->remove(group);  // what was made before the failure
    throw;
  }
  spec.child_setup = [files = cg_->procs_files(group)] { return cgroup::attach_self_to(files, ::getpid()); };
  spec.child_setup_what = "cannot join the instance's cgroup";
  return group;
}

Launcher::Id LocalLauncher::start(const LaunchRequest& request) {
  Child& child = children_.emplace_back();
  // The probe runs before the instance's clock starts: its time is not the instance's.
  child.sampling = sampler_.begin(request.cpus);
  child.started = SteadyClock::now();
  child.started_at = SystemClock::now();
  core::ProcessSpec spec;
  spec.executable = request.executable;
  spec.args = request.argv;
  spec.env = core::current_environment();
  for (const auto& [k, v] : request.env) (*spec.env)[k] = v;
  spec.output = core::Output::File;
  spec.log_path = request.log.string();
  spec.log_header = request.log_header;
  spec.cpus = request.cpus;
  try {
    child.group = make_slice(request, spec);
    child.process.emplace(spec);
  } catch (const std::exception& e) {
    Ending ending;
    ending.launch_error = e.what();
    ending.started = ending.ended = child.started_at;
    release_slice(child.group, ending);
    child.ending = ending;
  }
  return static_cast<Id>(children_.size() - 1);
}

std::optional<Ending> LocalLauncher::poll(Id id) {
  Child& child = children_.at(static_cast<std::size_t>(id));
  if (child.ending) return child.ending;
  if (const auto status = child.process->try_wait()) child.ending = ending_of(child, *status);
  return child.ending;
}

Ending LocalLauncher::ending_of(Child& child, const core::ExitStatus& status) {
  // Anything the instance left behind in its group goes with it.
  core::signal_process_group(child.process->pid(), SIGKILL);
  Ending ending;
  ending.exited = status.exited;
  ending.exit_code = status.code;
  ending.signal = status.signal;
  ending.started = child.started_at;
  ending.wall_seconds = std::chrono::duration<double>(SteadyClock::now() - child.started).count();
  ending.ended = child.started_at +
                 std::chrono::duration_cast<SystemClock::duration>(std::chrono::duration<double>(ending.wall_seconds));
  ending.resources = rusage_resources(status);
  release_slice(child.group, ending);
  // Own CPU time: the cgroup's (the whole slice) when in one, else rusage's.
  const std::optional<double> own_cpu = ending.resources ? ending.resources->cpu_seconds : std::nullopt;
  if (child.sampling) ending.interference = sampler_.end(*child.sampling, own_cpu);
  return ending;
}

// Reads the slice's usage into `ending` (when the process ran) and removes the slice.
void LocalLauncher::release_slice(const std::string& group, Ending& ending) {
  if (group.empty()) return;
  const cgroup::Usage usage = cg_->usage(group);
  ending.oom_kills = usage.oom_kills;
  if (ending.launched()) {
    ending.resources = core::ResourcesInfo{.source = "cgroup",
                                           .cpu_seconds = usage.cpu_seconds,
                                           .memory_peak_bytes = static_cast<std::int64_t>(usage.memory_peak_bytes),
                                           .bytes_read = static_cast<std::int64_t>(usage.bytes_read),
                                           .oom_kills = static_cast<std::int64_t>(usage.oom_kills)};
  }
  if (!cg_->remove(group))
    std::cerr << "mlbench-run: warning: cgroup " << group << " could not be removed" << std::endl;
}

void LocalLauncher::signal(Id id, int sig) {
  Child& child = children_.at(static_cast<std::size_t>(id));
  if (child.process && !child.ending) child.process->signal_group(sig);
}

int LocalLauncher::wait(double seconds) {
  return wait_for_runner_signal(seconds);
}

double LocalLauncher::now() const {
  return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count();
}

}  // namespace mlbench::runner
