// The v1/v2 control-file mapping and the parsers of their contents.
#include "cgroup/control_files.h"

#include <gtest/gtest.h>

using namespace mlbench::cgroup;

TEST(ControlFiles, V1Names) {
  EXPECT_EQ(control_file(Version::V1, Knob::MemoryLimit).file, "memory.limit_in_bytes");
  EXPECT_EQ(control_file(Version::V1, Knob::MemoryPeak).file, "memory.max_usage_in_bytes");
  EXPECT_EQ(control_file(Version::V1, Knob::OomEvents).file, "memory.oom_control");
  EXPECT_EQ(control_file(Version::V1, Knob::CpuUsage).controller, "cpuacct");
  EXPECT_EQ(control_file(Version::V1, Knob::CpuUsage).file, "cpuacct.usage");
  EXPECT_EQ(control_file(Version::V1, Knob::IoStat).file, "blkio.throttle.io_service_bytes");
  EXPECT_EQ(control_file(Version::V1, Knob::CpusetCpus).file, "cpuset.cpus");
}

TEST(ControlFiles, V2Names) {
  EXPECT_EQ(control_file(Version::V2, Knob::MemoryLimit).file, "memory.max");
  EXPECT_EQ(control_file(Version::V2, Knob::MemoryPeak).file, "memory.peak");
  EXPECT_EQ(control_file(Version::V2, Knob::OomEvents).file, "memory.events");
  EXPECT_EQ(control_file(Version::V2, Knob::CpuUsage).file, "cpu.stat");
  EXPECT_EQ(control_file(Version::V2, Knob::IoStat).file, "io.stat");
  EXPECT_EQ(control_file(Version::V2, Knob::CpusetMems).file, "cpuset.mems");
}

TEST(ControlFiles, Controllers) {
  EXPECT_EQ(slice_controllers(Version::V1, false), (std::vector<std::string>{"cpuset", "cpu", "cpuacct", "memory"}));
  EXPECT_EQ(slice_controllers(Version::V1, true).back(), "blkio");
  EXPECT_EQ(slice_controllers(Version::V2, true), (std::vector<std::string>{"cpuset", "cpu", "memory", "io"}));
}

TEST(ControlFiles, MemoryLimitValue) {
  EXPECT_EQ(memory_limit_value(Version::V1, 1048576), "1048576");
  EXPECT_EQ(memory_limit_value(Version::V1, std::nullopt), "-1");
  EXPECT_EQ(memory_limit_value(Version::V2, std::nullopt), "max");
}

TEST(ControlFiles, CpuSeconds) {
  EXPECT_DOUBLE_EQ(parse_cpu_seconds(Version::V1, "2500000000\n"), 2.5);
  EXPECT_DOUBLE_EQ(parse_cpu_seconds(Version::V2, "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n"), 1.5);
  EXPECT_THROW(parse_cpu_seconds(Version::V2, "user_usec 1\n"), std::invalid_argument);
  EXPECT_THROW(parse_cpu_seconds(Version::V1, "abc"), std::invalid_argument);
}

TEST(ControlFiles, OomKills) {
  EXPECT_EQ(parse_oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"), 2u);
  EXPECT_EQ(parse_oom_kills("low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n"), 1u);
  EXPECT_EQ(parse_oom_kills("oom_kill_disable 0\nunder_oom 0\n"), 0u);  // old kernels: no counter
}

TEST(ControlFiles, BytesRead) {
  EXPECT_EQ(parse_bytes_read(Version::V1, "8:0 Read 4096\n8:0 Write 100\n8:16 Read 1000\n8:0 Total 4196\nTotal 5196\n"),
            5096u);
  EXPECT_EQ(parse_bytes_read(Version::V2, "8:0 rbytes=4096 wbytes=0 rios=1 wios=0\n259:0 rbytes=10 wbytes=3\n"), 4106u);
  EXPECT_EQ(parse_bytes_read(Version::V2, ""), 0u);
}

TEST(ControlFiles, Integer) {
  EXPECT_EQ(parse_integer("123\n", "x"), 123u);
  EXPECT_THROW(parse_integer("max\n", "memory.peak"), std::invalid_argument);
}
