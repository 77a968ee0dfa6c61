// The launcher for this machine: each instance a core::Process (own process group,
// dies with the runner) in its cgroup slice (CPU set, memory limit) when cgroups are
// usable, else confined by CPU affinity only. The runner's signals (Ctrl-C, SIGTERM,
// SIGHUP, SIGCHLD) are blocked and taken in wait(), in the one thread, never in a handler.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cgroup/slice.h"
#include "core/process.h"
#include "interference.h"
#include "launcher.h"

namespace mlbench::runner {

class LocalLauncher : public Launcher {
 public:
  // With `use_cgroups`, removes the groups of earlier runs whose runner is gone (their
  // leftover processes killed), then creates the run's group mlbench/<run_id> over
  // `cpus`; when cgroups are not usable, says why on stderr and confines by affinity.
  LocalLauncher(bool use_cgroups, const std::vector<int>& cpus, const std::string& run_id);
  // Removes the run's group, and mlbench/ when no other run uses it.
  ~LocalLauncher() override;
  LocalLauncher(const LocalLauncher&) = delete;
  LocalLauncher& operator=(const LocalLauncher&) = delete;

  Id start(const LaunchRequest& request) override;
  std::optional<Ending> poll(Id id) override;
  void signal(Id id, int sig) override;
  int wait(double seconds) override;
  double now() const override;
  std::string isolation() const override { return cgroup::to_string(isolation_); }

  // "mlbench/<run-id>", or nullopt without cgroups.
  std::optional<std::string> cgroup_parent() const;

 private:
  struct Child {
    std::optional<core::Process> process;
    std::string group;  // "" without a slice
    std::chrono::steady_clock::time_point started;
    std::chrono::system_clock::time_point started_at;
    std::optional<Ending> ending;
    std::optional<InterferenceSampler::Running> sampling;
  };
  void open_cgroups(const std::vector<int>& cpus, const std::string& run_id);
  std::vector<std::filesystem::path> group_dirs(const std::string& group) const;
  void remove_stale_runs();
  std::string make_slice(const LaunchRequest& request, core::ProcessSpec& spec);
  Ending ending_of(Child& child, const core::ExitStatus& status);
  void release_slice(const std::string& group, Ending& ending);

  std::optional<cgroup::Hierarchy> cg_;
  std::string parent_;
  cgroup::Isolation isolation_ = cgroup::Isolation::Affinity;
  std::vector<Child> children_;
  InterferenceSampler sampler_;
};

}  // namespace mlbench::runner
