// The Slurm launcher: each instance a job step (srun) inside the allocation the runner
// runs in (salloc/sbatch). A slot is `--nodes=1 --ntasks=1 --cpus-per-task=C --mem=M`
// (`--gres=gpu:G` with GPUs); Slurm's task/cgroup plugin confines it. An `all` job is
// one step with a task on every node. Signals go to the step with scancel; how the step
// ended (Slurm's state: OUT_OF_MEMORY, CANCELLED, ...) is read from what srun and
// slurmstepd wrote into the instance's log, so no accounting database is needed.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/process.h"
#include "launcher.h"

namespace mlbench::runner {

// The allocation the runner runs in, from the variables salloc/sbatch set.
struct SlurmAllocation {
  std::string job_id;                            // SLURM_JOB_ID
  std::vector<int> cpus_per_node;                // SLURM_JOB_CPUS_PER_NODE, one entry per node
  std::optional<std::uint64_t> memory_per_node;  // SLURM_MEM_PER_NODE (MiB in the variable)
  int ntasks = 0;         // SLURM_NTASKS (0: unset)
  int cpus_per_task = 0;  // SLURM_CPUS_PER_TASK (0: unset)

  int nodes() const { return static_cast<int>(cpus_per_node.size()); }
  int total_cpus() const;
};

// "2(x3),4" -> {2, 2, 2, 4}; throws std::invalid_argument naming the text.
std::vector<int> parse_cpus_per_node(const std::string& text);

// The runner's slots in `a` when --slots is not given, as srun would place tasks: the
// allocation's SLURM_NTASKS, else its CPUs / SLURM_CPUS_PER_TASK, else `fallback`.
int slurm_default_slots(const SlurmAllocation& a, int fallback);

// The allocation of `env`; nullopt with `why` when the runner is not inside one
// (throws std::invalid_argument for a variable it cannot read).
std::optional<SlurmAllocation> slurm_allocation(const std::map<std::string, std::string>& env, std::string* why);

// srun's arguments (after "srun") for `request` as step `name` of `allocation`; the
// runner enforces timeouts itself, Slurm's --time (timeout + grace + a minute) is the backstop.
// A whole-allocation step on several nodes runs its tasks through /bin/sh so that
// ranks > 0 write their reports to OUTPUT_DIRECTORY/rank<k>/.
std::vector<std::string> srun_args(const LaunchRequest& request, const SlurmAllocation& allocation,
                                   const std::string& name, double kill_grace);

// The step's state from the end of its log (srun's and slurmstepd's own lines) and
// srun's exit: OUT_OF_MEMORY, TIMEOUT, NODE_FAIL, PREEMPTED, CANCELLED, else
// COMPLETED (exit 0) or FAILED.
std::string step_state(const std::string& log_tail, bool exited, int exit_code);
// The signal that killed the task when srun says so (`srun: error: n1: task 0:
// Segmentation fault` and exit 128 + 11), else 0: srun turns a task's death by a signal
// into its own exit code, which alone cannot be told from a benchmark's `exit 139`.
int task_signal(const std::string& log_tail, int srun_exit_code);
// srun's line saying the step could not be created ("" when none): the instance never ran.
std::string step_creation_error(const std::string& log_tail);

class SlurmLauncher : public Launcher {
 public:
  // Resolves srun, scancel and squeue on PATH (throws std::runtime_error naming the one missing).
  SlurmLauncher(SlurmAllocation allocation, double kill_grace);
  ~SlurmLauncher() override;
  SlurmLauncher(const SlurmLauncher&) = delete;
  SlurmLauncher& operator=(const SlurmLauncher&) = delete;

  Id start(const LaunchRequest& request) override;
  std::optional<Ending> poll(Id id) override;
  // SIGKILL cancels the step (scancel); other signals are delivered to its tasks
  // (scancel --signal). Before Slurm knows the step, srun itself gets the signal.
  void signal(Id id, int sig) override;
  int wait(double seconds) override;
  double now() const override;
  std::string isolation() const override { return "slurm"; }

 private:
  struct Step {
    std::optional<core::Process> srun;
    std::string name;     // the step's --job-name, unique in the allocation
    std::string step_id;  // "<job>.<step>" once squeue showed it
    std::filesystem::path log;
    std::chrono::steady_clock::time_point started;
    std::chrono::system_clock::time_point started_at;
    std::optional<Ending> ending;
  };
  std::string find_step_id(Step& step);
  void cancel(Step& step, int sig);

  SlurmAllocation allocation_;
  double kill_grace_;
  std::string srun_, scancel_, squeue_;
  std::vector<Step> steps_;
};

}  // namespace mlbench::runner
