// stall/job_watch.h: the launcher a command names, and the faults read from the ranks'
// announcements (files as the probe writes them; pids of processes that exist, or not).
#include "stall/job_watch.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/sysinfo.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using namespace mlbench::stall;

TEST(JobWatch, NamesTheLauncherFromTheCommand) {
  EXPECT_EQ(launcher_of({"/usr/bin/torchrun", "--nproc_per_node", "2", "train.py"}), "torchrun");
  EXPECT_EQ(launcher_of({"python3", "-m", "torch.distributed.launch", "--nproc_per_node=2", "train.py"}),
            "torch.distributed.launch");
  EXPECT_EQ(launcher_of({"srun", "-n", "2", "python3", "train.py"}), "srun");
  EXPECT_EQ(launcher_of({"sh", "-c", "RANK=0 python3 t.py & RANK=1 python3 t.py; wait"}),
            "the shell command (ranks started by hand)");
  EXPECT_EQ(launcher_of({"python3", "my_launcher.py", "--nproc-per-node", "2", "t.py"}),
            "my_launcher.py (a launcher: --nproc-per-node)");
  // A single process is no launcher: it fails as it always did.
  EXPECT_EQ(launcher_of({"python3", "train.py", "--epochs", "2"}), "");
  EXPECT_EQ(launcher_of({"sh", "-c", "python3 train.py"}), "");
}

class JobWatchFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = mlbench::testing_support::scratch_dir("job_watch");
    fs::create_directories(dir_ / "ranks");
  }
  void TearDown() override { fs::remove_all(dir_); }
  // An announcement of `pid` (this host's), as the probe writes it, started after the ones before.
  void announce(int pid, int rank, const std::string& stage, const std::string& extra = "") {
    std::ofstream(dir_ / "ranks" / fmt::format("{}.{}.json", mlbench::core::hostname(), pid))
        << fmt::format(R"({{"pid": {}, "ppid": 1, "host": "{}", "rank": {}, "world_size": 2, "from": "env",
                         "stage": "{}", "started": {}, "since": 0{}}})",
                       pid, mlbench::core::hostname(), rank, stage, ++order_, extra);
  }
  fs::path dir_;
  int order_ = 0;  // the announcements' start times: in the order they are made
};

// A pid that no process has (pid_max is at most 2^22).
constexpr int kGone = 4194303;

TEST_F(JobWatchFiles, ARankGoneWithoutItsReportIsDeadOnceTheGraceIsOver) {
  announce(::getpid(), 0, "iterating");
  announce(kGone, 1, "iterating");
  JobWatch grace(dir_, {"sh"}, 100, 1000);
  EXPECT_FALSE(grace.poll(1).has_value());  // within the grace: a restart may yet come
  JobWatch watch(dir_, {"sh"}, 100, 0);
  const auto f = watch.poll(1);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, "rank_died");
  EXPECT_NE(f->line.find(fmt::format("rank 1 (pid {}) died while iterating without its report", kGone)),
            std::string::npos)
      << f->line;
  EXPECT_EQ(watch.local_pids(), std::vector<int>{::getpid()});
}

TEST_F(JobWatchFiles, ARankThatReportedAndEndedIsNoFault) {
  announce(::getpid(), 0, "iterating");
  announce(kGone, 1, "reported", R"(, "completed": true, "report": "r.json")");
  JobWatch watch(dir_, {"sh"}, 100, 0);
  EXPECT_FALSE(watch.poll(1).has_value());
  mlbench::core::ExitStatus ok;
  ok.exited = true;
  EXPECT_FALSE(watch.after_exit(ok, dir_ / "log").has_value());
}

TEST_F(JobWatchFiles, OneRankWithASecondPidWasRestarted) {
  announce(kGone, 1, "iterating");
  announce(::getpid(), 1, "started");
  announce(::getppid(), 0, "iterating");
  JobWatch watch(dir_, {"sh"}, 100, 0);
  const auto f = watch.poll(1);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, "restarted");
  EXPECT_NE(f->line.find(fmt::format("rank 1 was restarted by the launcher (pid {}, then pid {})", kGone, ::getpid())),
            std::string::npos)
      << f->line;
}

TEST_F(JobWatchFiles, RanksWithoutABatchAfterTheLimitAreNamedWithWhereTheyAre) {
  announce(::getpid(), 0, "init_process_group");
  JobWatch watch(dir_, {"sh"}, 30, 0);
  EXPECT_FALSE(watch.poll(29).has_value());
  ::usleep(110000);  // the watch reads at most every 0.1 s
  const auto f = watch.poll(30);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->line,
            "rank 0 never iterated in 30 s: stuck in init_process_group (waiting for its peers); rank 1 never started "
            "(world size 2)");
}

// A process whose child is announced is their launcher (srun's task running torchrun), not a rank.
TEST_F(JobWatchFiles, TheParentOfAnAnnouncedRankIsItsLauncher) {
  std::ofstream(dir_ / "ranks" / fmt::format("{}.{}.json", mlbench::core::hostname(), ::getppid()))
      << fmt::format(R"({{"pid": {}, "ppid": 1, "host": "{}", "rank": 0, "world_size": 1, "from": "slurm",
                       "stage": "started", "started": 1, "since": 0}})",
                     ::getppid(), mlbench::core::hostname());
  std::ofstream(dir_ / "ranks" / fmt::format("{}.{}.json", mlbench::core::hostname(), ::getpid()))
      << fmt::format(R"({{"pid": {}, "ppid": {}, "host": "{}", "rank": 0, "world_size": 2, "from": "env",
                       "stage": "iterating", "started": 2, "since": 0}})",
                     ::getpid(), ::getppid(), mlbench::core::hostname());
  announce(kGone + 0, 1, "iterating");
  JobWatch watch(dir_, {"srun"}, 100, 0);
  const auto f = watch.poll(1);  // not "rank 0 restarted": rank 1's death
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, "rank_died") << f->line;
}

}  // namespace
