// A job across nodes under --exec (docs/stall.md, "Across nodes (Slurm)"): `srun -N2 ... python3
// train.py` under mlbench-stall --exec. Every rank's probe writes where it ran in its report's
// `rank` block (node: srun's SLURMD_NODENAME, else the host; its CPUs as Slurm or an affinity gave
// them; the kernel's boot id; its memory and its cgroup's memory.max). This groups stall.json's
// ranks by node: each rank's `node` and `cpus`, and a `nodes` block with each node's ranks, CPUs
// and page cache (shared when the nodes run on one kernel, as on the test suite's private cluster
// on one host), and the partitioned-cache what-if (stall/partitioned_model.h) at the job's own
// node count, a node being its ranks. Pure but for add_nodes_block, which reads the ranks'
// reports and this machine's boot id.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlbench::stall {

// Where one rank ran, from its report's `rank` block.
struct RankPlace {
  int rank = 0;
  double rate = 0;   // the rank's samples/s (stall.json ranks[].rate)
  std::string node;  // `node`, else `host`, else ""
  std::string host;
  std::optional<int> node_id;
  std::string boot_id;    // "" when not recorded
  std::vector<int> cpus;  // the CPUs it could run on; empty when not recorded
  std::optional<int> cpus_per_task;
  std::optional<double> mem_total_mib, memory_max_mib;
};

// From a report's `rank` block (null or absent: only `rank` and `rate` set).
RankPlace rank_place(const nlohmann::json& rank_block, int rank, double rate);

// stall.json's `nodes`: the ranks grouped by node (in rank order of their first rank), each
// node's CPUs and page cache; `page_cache` (shared: every node on one kernel; `analyzer_boot_id`
// tells whether the analysis's own page-cache states, set on its machine, reached them);
// `partitioned`: the partitioned cache at the job's node count from `partitioned_whatif`
// (stall.json's whatif.partitioned; null: none) with each rate x the ranks a node runs, null
// where it cannot be had (`partitioned_note` says why). `dataset_bytes`: 0 when unknown.
nlohmann::json nodes_json(const std::vector<RankPlace>& ranks, const nlohmann::json& partitioned_whatif,
                          const std::string& analyzer_boot_id, double dataset_bytes);

// The CPU sweep's runs (`cpus-N`) limit the CPUs of the command they start, which tasks that srun
// starts on a node do not inherit: they take the CPUs Slurm gives them (--cpus-per-task), and the
// probe in each splits those (probe/mlbench_probe.py, job_cpus_for). One warning per such run where
// a rank still ran on more than N CPUs (the split not applied: its cpu_split.error; or the script's
// own affinity) (`ranks_by_run`: each run's ranks, by its label); none where every rank kept to N
// or the CPUs were not recorded.
std::vector<std::string> cpu_sweep_warnings(const std::map<std::string, std::vector<RankPlace>>& ranks_by_run);

// The hook for analyze(): where result has `ranks`, reads each rank's report (ranks[].report),
// adds `node` and `cpus` to each ranks[] entry and result["nodes"]; and to result["warnings"] the
// CPU sweep's runs that did not reach the ranks (cpu_sweep_warnings, from runs.<label>.ranks).
void add_nodes_block(nlohmann::json& result);

// The console's lines for stall.json's `nodes` ("" when absent or of one node).
std::string nodes_text(const nlohmann::json& result);

}  // namespace mlbench::stall
