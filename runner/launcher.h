// The launcher seam: how the scheduler starts an instance (with its slot, environment,
// limits and log), signals it, waits, and learns how it ended. LocalLauncher runs it
// on this machine (core::Process + cgroup slices); SlurmLauncher makes it a Slurm job
// step; tests use a fake.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/instance_report.h"

namespace mlbench::runner {

// One process to start.
struct LaunchRequest {
  std::string executable;
  std::vector<std::string> argv;           // after the executable
  std::map<std::string, std::string> env;  // set on top of the runner's environment
  int slot = 0;
  std::vector<int> cpus;                      // CPU set (empty: the runner's)
  std::optional<std::uint64_t> memory_bytes;  // memory limit (nullopt: none)
  std::string cgroup;                         // slice name under the run's group ("": no slice)
  std::filesystem::path log;                  // stdout+stderr, truncated
  std::string log_header;                     // written first
  double timeout = 0;                         // seconds the scheduler allows it (0: none); Slurm's --time backstop
  bool whole_allocation = false;              // an `all` job: the whole machine (under Slurm: every node)
};

// How a launched process ended, with its own start and end times.
struct Ending {
  std::string launch_error;  // non-empty: it never ran (nothing below is meaningful)
  bool exited = false;       // normal exit with exit_code; else killed by `signal`
  int exit_code = 0;
  int signal = 0;
  std::uint64_t oom_kills = 0;
  std::optional<core::ResourcesInfo> resources;        // CPU seconds, peak memory, ...; none when it never ran
  std::optional<core::InterferenceInfo> interference;  // what else used its CPUs (interference.h); none unsampled
  std::chrono::system_clock::time_point started;
  std::chrono::system_clock::time_point ended;
  double wall_seconds = 0;
  // The launcher's own word for how it ended: Slurm's job-step state (COMPLETED, FAILED,
  // OUT_OF_MEMORY, TIMEOUT, CANCELLED, NODE_FAIL, ...); "" for the local launcher.
  std::string state;

  bool launched() const { return launch_error.empty(); }
};

class Launcher {
 public:
  using Id = int;
  virtual ~Launcher() = default;

  // Starts the process; never throws: a failed start ends at once with launch_error.
  virtual Id start(const LaunchRequest& request) = 0;
  // How it ended, once it has (its slice released); nullopt while it runs.
  virtual std::optional<Ending> poll(Id id) = 0;
  // Sends `sig` to everything the process started (its process group).
  virtual void signal(Id id, int sig) = 0;
  // Returns after at most `seconds`, earlier when a process may have ended or the
  // runner was asked to stop: then the signal (SIGINT, SIGTERM, SIGHUP), else 0.
  virtual int wait(double seconds) = 0;
  // Seconds on a steady clock (deadlines are measured with it).
  virtual double now() const = 0;
  // What confines instances: "cgroup-v1", "cgroup-v2", "affinity" or "slurm".
  virtual std::string isolation() const = 0;
};

}  // namespace mlbench::runner
