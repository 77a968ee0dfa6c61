// Reliability tests of mlbench-datagen (docs/reliability.md, fault 5): an interrupted
// generation leaves no hidden .NAME.partial-PID folder, and one left by a
// process that is gone (SIGKILL) is removed by the next generation.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/process.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using mlbench::testing_support::TempDir;

namespace {

// The .NAME.partial-* folders under `root`.
int partial_folders(const fs::path& root) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(root))
    n += e.path().filename().string().find(".partial-") != std::string::npos;
  return n;
}

}  // namespace

TEST(DatagenFaults, SigintAndSigtermRemoveThePartialFolder) {
  for (const int sig : {SIGINT, SIGTERM}) {
    TempDir root("datagen_faults");
    mlbench::core::ProcessSpec spec;
    spec.executable = MLBENCH_DATAGEN;
    // Far more images than any machine makes before the signal lands.
    spec.args = {"fake-imagenet", "--out",     (root.path() / "big").string(),
                 "--classes",     "1000",      "--per-class",
                 "1000",          "--threads", "1",
                 "--quiet"};
    spec.output = mlbench::core::Output::Capture;
    mlbench::core::Process datagen(spec);
    for (int i = 0; i < 200 && partial_folders(root.path()) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ASSERT_EQ(partial_folders(root.path()), 1) << "generation did not start";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // mid-way through the images
    ::kill(datagen.pid(), sig);
    const auto status = datagen.wait_for(30);
    ASSERT_TRUE(status.has_value()) << "mlbench-datagen did not stop on signal " << sig;
    EXPECT_TRUE(status->exited) << "signal " << sig << " killed it before it cleaned up";
    EXPECT_EQ(status->code, 128 + sig) << datagen.output();
    EXPECT_EQ(partial_folders(root.path()), 0) << "signal " << sig << " left the partial folder\n" << datagen.output();
    EXPECT_FALSE(fs::exists(root.path() / "big"));
  }
}

TEST(DatagenFaults, PartialFolderOfAGoneProcessIsRemovedByTheNextRun) {
  TempDir root("datagen_faults");
  // A pid that surely is gone: a child that has exited and been reaped.
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  waitpid(gone, nullptr, 0);
  const fs::path stale = root.path() / (".mnist-tiny.partial-" + std::to_string(gone));
  fs::create_directories(stale / "train");
  // A partial folder of a live process (this test) is someone's work in progress: kept.
  const fs::path live = root.path() / (".mnist-tiny.partial-" + std::to_string(getpid()));
  fs::create_directories(live);
  const auto r = mlbench::testing_support::run_command(std::string(MLBENCH_DATAGEN) + " ensure mnist-tiny --root " +
                                                       root.path().string() + " --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(stale)) << r.output;
  EXPECT_TRUE(fs::exists(live));
  EXPECT_NE(r.output.find("removed " + stale.string()), std::string::npos) << r.output;
}
