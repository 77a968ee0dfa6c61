// Real cgroups: create a slice with limits, attach a process, read its usage,
// remove it from every controller. Needs root and cgroup v1 or v2 with the
// controllers; skips (saying why) elsewhere.
#include "cgroup/slice.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

using namespace mlbench::cgroup;
namespace fs = std::filesystem;

namespace {
std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}
}  // namespace

TEST(Slice, CreateAttachUsageRemove) {
  std::string why;
  auto h = Hierarchy::open(&why);
  if (!h) GTEST_SKIP() << "cgroups not usable here: " << why;
  const std::string parent = "mlbench-test-" + std::to_string(getpid());
  const std::string group = parent + "/student0";
  h->create(parent, {{}, {}, std::nullopt});
  h->create(group, {{0}, {}, 64ull << 20});
  EXPECT_EQ(read(h->dir("cpuset", group) / "cpuset.cpus"), "0");
  const ControlFile limit = control_file(h->version(), Knob::MemoryLimit);
  EXPECT_EQ(read(h->dir("memory", group) / limit.file), std::to_string(64ull << 20));

  const pid_t pid = fork();
  if (pid == 0) {
    // Child: join through the same path the runner uses, then burn a little CPU.
    if (attach_self_to(h->procs_files(group), getpid()) != 0) _exit(9);
    volatile double x = 0;
    for (long i = 0; i < 50'000'000; ++i) x = x + 1;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child could not join the cgroup";
  const Usage u = h->usage(group);
  EXPECT_GT(u.cpu_seconds, 0.0);
  EXPECT_GT(u.memory_peak_bytes, 0u);
  EXPECT_EQ(u.oom_kills, 0u);

  EXPECT_TRUE(h->remove(group));
  EXPECT_TRUE(h->remove(parent));
  for (const char* c : {"cpuset", "cpu", "memory"}) EXPECT_FALSE(fs::exists(h->dir(c, parent))) << c;
}

TEST(Slice, AttachThroughLibcgroup) {
  std::string why;
  auto h = Hierarchy::open(&why);
  if (!h) GTEST_SKIP() << "cgroups not usable here: " << why;
  const std::string group = "mlbench-test-attach-" + std::to_string(getpid());
  h->create(group, {{}, {}, std::nullopt});
  const pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  h->attach(group, pid);
  std::ifstream procs(h->dir("memory", group) / "cgroup.procs");
  std::string line;
  std::getline(procs, line);
  EXPECT_EQ(line, std::to_string(pid));
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_TRUE(h->remove(group));
}
