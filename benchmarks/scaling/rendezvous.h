// Where a data-parallel rank finds the others, from its environment: torchrun's
// MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE, or a Slurm step's SLURM_PROCID /
// SLURM_NTASKS / SLURM_STEP_NODELIST (the first node hosts rank 0's store). Plain
// functions over an environment map, so they are unit-tested without LibTorch.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlbench::scaling {

struct Rendezvous {
  int rank = 0;
  int world = 1;
  std::string master_addr;  // host of rank 0's TCPStore
  int master_port = 0;
  std::string source;       // "env" (MASTER_*), "slurm", or "local" (spawned by rank 0)
};

using Getenv = std::function<std::optional<std::string>(const std::string&)>;
// The process environment.
std::optional<std::string> process_env(const std::string& name);

// WORLD_SIZE set: the MASTER_* variables (MASTER_ADDR defaults to 127.0.0.1;
// MASTER_PORT required). Else SLURM_NTASKS > 1: the step's variables, port
// MASTER_PORT or one derived from SLURM_JOB_ID and SLURM_STEP_ID in
// [kSlurmPortBase, kSlurmPortBase + 10000). Else nullopt (run locally). Throws
// std::invalid_argument naming the variable that is missing or malformed.
std::optional<Rendezvous> rendezvous_from_env(const Getenv& env = process_env);

inline constexpr int kSlurmPortBase = 29500;

// The CPUs of local rank `rank` of `world` ranks sharing the CPUs `affinity` with `threads` each:
// affinity[rank x threads, (rank + 1) x threads), each rank on CPUs of its own, as a server with C
// CPUs and K GPUs splits them. Empty (no pinning: the ranks share every CPU) when world x threads
// CPUs are not there, or for one rank.
std::vector<int> rank_cpus(const std::vector<int>& affinity, int threads, int world, int rank);

// The rank's local rank, as a report's `rank` block names it: its own rank for ranks started on
// this machine ("local"), LOCAL_RANK (torchrun) or SLURM_LOCALID (a Slurm step) where set, else none.
std::optional<int> local_rank_of(const Rendezvous& rv, const Getenv& env = process_env);

// The first host of a Slurm node list: "n1" -> n1, "n[1-2]" -> n1, "n[3,5-6],m1" ->
// n3, "node-[007-009]" -> node-007. Throws std::invalid_argument on an empty list.
std::string first_host(const std::string& nodelist);

}  // namespace mlbench::scaling
