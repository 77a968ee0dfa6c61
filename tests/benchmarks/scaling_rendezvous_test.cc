// Unit tests of the scaling benchmark's rendezvous (benchmarks/scaling/rendezvous.h):
// torchrun's variables, a Slurm step's, and the errors a user meets, on fixed
// environments.
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rendezvous.h"

namespace mlbench::scaling {
namespace {

Getenv env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ScalingRendezvous, NoVariablesMeansLocal) {
  EXPECT_FALSE(rendezvous_from_env(env_of({})).has_value());
  // A one-task Slurm step is not a distributed run either.
  EXPECT_FALSE(rendezvous_from_env(env_of({{"SLURM_NTASKS", "1"}, {"SLURM_PROCID", "0"}})).has_value());
}

TEST(ScalingRendezvous, TorchrunVariables) {
  auto r = rendezvous_from_env(
      env_of({{"WORLD_SIZE", "4"}, {"RANK", "3"}, {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->world, 4);
  EXPECT_EQ(r->master_addr, "10.0.0.7");
  EXPECT_EQ(r->master_port, 29500);
  EXPECT_EQ(r->source, "env");
  // MASTER_ADDR defaults to the loopback address.
  r = rendezvous_from_env(env_of({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(r->master_addr, "127.0.0.1");
}

TEST(ScalingRendezvous, BadVariablesNameTheVariable) {
  auto message = [](std::map<std::string, std::string> vars) {
    try {
      rendezvous_from_env(env_of(std::move(vars)));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({{"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}), "RANK is not set (set with WORLD_SIZE)");
  EXPECT_EQ(message({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_PORT", "1"}}),
            "RANK=2 is not an integer in [0, 1]");
  EXPECT_EQ(message({{"WORLD_SIZE", "two"}, {"RANK", "0"}}), "WORLD_SIZE=two is not an integer in [1, 65536]");
  EXPECT_EQ(message({{"WORLD_SIZE", "2"}, {"RANK", "0"}}), "MASTER_PORT is not set (set with WORLD_SIZE)");
  EXPECT_EQ(message({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}}),
            "SLURM_STEP_NODELIST is not set (set in a Slurm step)");
}

TEST(ScalingRendezvous, SlurmStepVariables) {
  auto r = rendezvous_from_env(env_of({{"SLURM_NTASKS", "2"},
                                       {"SLURM_PROCID", "1"},
                                       {"SLURM_STEP_NODELIST", "n[1-2]"},
                                       {"SLURM_JOB_ID", "17"},
                                       {"SLURM_STEP_ID", "3"}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->world, 2);
  EXPECT_EQ(r->master_addr, "n1");
  EXPECT_EQ(r->master_port, kSlurmPortBase + 17 * 64 + 3);
  EXPECT_EQ(r->source, "slurm");
  // MASTER_PORT wins over the derived port.
  r = rendezvous_from_env(env_of({{"SLURM_NTASKS", "2"},
                                  {"SLURM_PROCID", "0"},
                                  {"SLURM_STEP_NODELIST", "gpu07"},
                                  {"SLURM_JOB_ID", "17"},
                                  {"MASTER_PORT", "4000"}}));
  EXPECT_EQ(r->master_port, 4000);
  EXPECT_EQ(r->master_addr, "gpu07");
}

TEST(ScalingRendezvous, FirstHostOfASlurmNodeList) {
  EXPECT_EQ(first_host("n1"), "n1");
  EXPECT_EQ(first_host("n[1-2]"), "n1");
  EXPECT_EQ(first_host("n[3,5-6],m1"), "n3");
  EXPECT_EQ(first_host("node-[007-009]"), "node-007");
  EXPECT_EQ(first_host("a1,b[2-3]"), "a1");
  EXPECT_THROW(first_host(""), std::invalid_argument);
}

// Local ranks each on CPUs of their own (the scaling benchmark pins them so, as a server with C
// CPUs and K GPUs splits its CPUs): consecutive blocks of `threads` CPUs of the affinity, in rank
// order; none where they do not fit, so that the ranks then share every CPU as before.
TEST(ScalingRankCpus, EachLocalRankGetsABlockOfItsOwn) {
  const std::vector<int> cpus{0, 1, 2, 3};
  EXPECT_EQ(rank_cpus(cpus, 1, 2, 0), (std::vector<int>{0}));
  EXPECT_EQ(rank_cpus(cpus, 1, 2, 1), (std::vector<int>{1}));
  EXPECT_EQ(rank_cpus(cpus, 2, 2, 1), (std::vector<int>{2, 3}));
  EXPECT_EQ(rank_cpus({4, 6, 9}, 1, 3, 2), (std::vector<int>{9}));  // the affinity's CPUs, not 0..n-1
  // Disjoint blocks that together cover world x threads CPUs.
  std::vector<int> all;
  for (int k = 0; k < 4; ++k) {
    const auto mine = rank_cpus(cpus, 1, 4, k);
    ASSERT_EQ(mine.size(), 1u);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  EXPECT_EQ(all, cpus);
}

TEST(ScalingRankCpus, NoPinningWhereTheCpusDoNotDivide) {
  EXPECT_TRUE(rank_cpus({0}, 1, 2, 0).empty());        // 2 ranks on 1 CPU share it
  EXPECT_TRUE(rank_cpus({0, 1, 2}, 2, 2, 0).empty());  // 2 x 2 threads on 3 CPUs
  EXPECT_TRUE(rank_cpus({0, 1}, 1, 1, 0).empty());     // one rank keeps the slot's CPUs
  EXPECT_TRUE(rank_cpus({0, 1}, 1, 2, 2).empty());     // no such rank
  EXPECT_TRUE(rank_cpus({0, 1}, 0, 2, 0).empty());
}

TEST(ScalingRankCpus, LocalRankComesFromTheRanksOwnSource) {
  Rendezvous local{1, 2, "127.0.0.1", 0, "local"};
  EXPECT_EQ(local_rank_of(local, env_of({{"LOCAL_RANK", "5"}})), 1);  // started here by rank 0
  Rendezvous env{3, 4, "10.0.0.7", 29500, "env"};
  EXPECT_EQ(local_rank_of(env, env_of({{"LOCAL_RANK", "1"}})), 1);
  EXPECT_EQ(local_rank_of(env, env_of({{"SLURM_LOCALID", "0"}})), 0);
  EXPECT_EQ(local_rank_of(env, env_of({})), std::nullopt);
  EXPECT_EQ(local_rank_of(env, env_of({{"LOCAL_RANK", "x"}})), std::nullopt);
}

}  // namespace
}  // namespace mlbench::scaling
