// Real cgroups: create a slice with limits, attach a process, read its usage,
// remove it from every controller. Needs root and cgroup v1 or v2 with the
// controllers; skips (saying why) elsewhere.
#include "cgroup/slice.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "core/process.h"

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

  // A child that joins through the same path the runner uses, then burns a little CPU.
  mlbench::core::ProcessSpec spec;
  spec.executable = "/bin/sh";
  spec.args = {"-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"};
  spec.child_setup = [files = h->procs_files(group)] { return attach_self_to(files, ::getpid()); };
  spec.child_setup_what = "cannot join the cgroup";
  mlbench::core::Process child(spec);
  const mlbench::core::ExitStatus status = child.wait();
  ASSERT_TRUE(status.exited);
  EXPECT_EQ(status.code, 0);
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
  mlbench::core::ProcessSpec spec;
  spec.executable = "/bin/sleep";
  spec.args = {"600"};
  mlbench::core::Process child(spec);
  h->attach(group, child.pid());
  std::ifstream procs(h->dir("memory", group) / "cgroup.procs");
  std::string line;
  std::getline(procs, line);
  EXPECT_EQ(line, std::to_string(child.pid()));
  child.signal_group(SIGKILL);
  child.wait();
  EXPECT_TRUE(h->remove(group));
}
