// --exec over a distributed job: the watch of its ranks while a run goes (docs/stall.md,
// "Distributed jobs", "When the job fails"). The probe in each rank announces it in the run's
// report folder (ranks/<host>.<pid>.json: its rank, pid, start time and stage: started,
// init_process_group, initialized, iterating, reported or ended; probe/mlbench_probe.py). The
// watch reads those announcements while the command runs and after it ended, and names the fault
// that makes the run's measurement void:
//  - launcher: the command ended and no rank was ever announced (a launcher that failed by itself:
//    Debian 12's torchrun on Python 3.11, say);
//  - rank_died: a rank's process vanished without its completed report (killed, or it raised);
//  - never_iterated: ranks still without a first batch after the run's probe timeout;
//  - restarted: one rank seen with a second pid (a launcher restarted it: torchrun --max-restarts).
// Each is one line naming the launcher or the rank; the run is then stopped (every process of the
// job: stop_job) and a FAIL record written in its report folder (write_fail_record).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/process.h"

namespace mlbench::stall {

// A process the probe announced (one file of ranks/).
struct Announced {
  int pid = 0, ppid = 0;
  std::string host;
  long long start_ticks = -1;  // /proc/<pid>/stat's start time; -1: unknown
  std::optional<int> rank;     // none: a launcher (it started ranks with torch.multiprocessing.spawn)
  std::optional<int> world_size;
  std::string from, stage, launcher, reason, report;
  std::optional<bool> completed;       // stage reported: whether its report completed
  int failed_pid = 0;                  // a launcher's: the rank that failed first (mp.spawn's join)
  std::optional<int> failed_exitcode;  // and its exit code (< 0: the signal)
  double started = 0;                  // wall-clock seconds of its start (its announcement's)
  double since = 0;                    // wall-clock seconds of its stage
};

// The launcher a command names, for the line of a launcher that failed by itself: "torchrun",
// "torch.distributed.launch" (python -m ...), "srun", "mpirun", "the shell command (ranks started by
// hand)" for a shell whose script sets RANK=, "<script> (a launcher: --nproc_per_node)" for a
// command with a launcher's flags; "" when the command is not known as a launcher.
std::string launcher_of(const std::vector<std::string>& command);

struct JobFault {
  std::string kind;       // launcher, rank_died, never_iterated, restarted
  std::string line;       // the one line (without the run's label)
  nlohmann::json record;  // the FAIL record's job_failure block (without stopped_pids)
};

class JobWatch {
 public:
  // `never_iterated_s`: the run's probe timeout; `death_grace_s`: how long a vanished rank may
  // stay unreplaced before it is called dead (a launcher's restart within it is named as such).
  JobWatch(std::filesystem::path report_dir, std::vector<std::string> command, double never_iterated_s,
           double death_grace_s = 1.0);
  // While the command runs (call it often; it reads at most every 0.1 s): the fault seen, if any.
  std::optional<JobFault> poll(double elapsed_s);
  // After the command ended by itself: the fault, if any (no rank ever started by a launcher; a
  // rank that vanished without its completed report, the exit status kept when it was seen).
  std::optional<JobFault> after_exit(const core::ExitStatus& status, const std::filesystem::path& log);
  // Whether any rank was announced (so far); whether the job has several (ranks, or a world size,
  // of more than one: a job of one rank fails as a single process does).
  bool any_rank() const;
  bool several_ranks() const;
  // The announced processes on this host (pids, for stop_job).
  std::vector<int> local_pids() const;

 private:
  struct Seen {
    Announced a;
    bool gone = false;
    std::chrono::steady_clock::time_point gone_at{};
    std::string ended;  // "killed by signal 9" / "exited with status 1", when its zombie was seen
  };
  void scan();
  std::optional<JobFault> restarted() const;
  std::optional<JobFault> died(bool now) const;
  std::optional<JobFault> never_iterated(double elapsed_s) const;
  nlohmann::json ranks_json(const std::vector<const Seen*>& which) const;

  std::filesystem::path dir_;
  std::vector<std::string> command_;
  double never_iterated_s_, death_grace_s_;
  std::string host_;
  std::map<std::string, Seen> seen_;  // by file name (<host>.<pid>.json)
  std::chrono::steady_clock::time_point last_scan_{};
};

// Stops every process of the job: SIGKILL to the command's process group, to each descendant of
// `root` (found through /proc, again until none is left) and to `also` (the ranks announced on this
// host, which a launcher may have started in sessions of their own). The pids it signalled.
std::vector<int> stop_job(pid_t root, const std::vector<int>& also);

// Writes the run's FAIL record (an instance report, completed false, `reason` the line, with the
// job_failure block) into `report_dir`; its path.
std::filesystem::path write_fail_record(const std::filesystem::path& report_dir, const std::string& line,
                                        nlohmann::json job_failure, const std::vector<int>& stopped,
                                        std::chrono::system_clock::time_point started);

}  // namespace mlbench::stall
