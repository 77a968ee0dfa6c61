#include "core/sysinfo.h"


#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

namespace mlbench::core {
namespace {

// The cgroup mode as /proc/mounts tells it, worked out apart from sysinfo.cc's
// statfs probe: cgroup2 mounted at /sys/fs/cgroup is v2; a tmpfs there with a
// v1 controller hierarchy (cpuset or memory) mounted below it is v1 (hybrid
// machines included); anything else is none.
std::string cgroup_mode_from_mounts(const std::string& mounts_text) {
  std::map<std::string, std::string> fstype_at;  // a later mount hides an earlier one
  std::istringstream in(mounts_text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string device, mount_point, fstype;
    if (fields >> device >> mount_point >> fstype) fstype_at[mount_point] = fstype;
  }
  auto at = [&](const std::string& p) {
    const auto it = fstype_at.find(p);
    return it == fstype_at.end() ? std::string() : it->second;
  };
  if (at("/sys/fs/cgroup") == "cgroup2") return "v2";
  if (at("/sys/fs/cgroup") == "tmpfs" &&
      (at("/sys/fs/cgroup/cpuset") == "cgroup" || at("/sys/fs/cgroup/memory") == "cgroup")) {
    return "v1";
  }
  return "none";
}

TEST(CgroupMode, FromMountsTableReadsEachLayout) {
  // The helper itself, on the three layouts, so that the check below means something.
  EXPECT_EQ(cgroup_mode_from_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n"), "v2");
  EXPECT_EQ(cgroup_mode_from_mounts("tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"
                                    "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n"
                                    "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"),
            "v1");
  EXPECT_EQ(cgroup_mode_from_mounts("proc /proc proc rw 0 0\n"), "none");
  EXPECT_EQ(cgroup_mode_from_mounts("tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"), "none");
}

TEST(CgroupMode, MatchesWhatTheMachineHasMounted) {
  std::ifstream in("/proc/mounts");
  ASSERT_TRUE(in) << "cannot read /proc/mounts";
  const std::string mounts((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string expected = cgroup_mode_from_mounts(mounts);
  EXPECT_EQ(to_string(cgroup_mode()), expected) << "/proc/mounts:\n" << mounts;
  EXPECT_EQ(machine_description()["cgroup_mode"], expected);
}

TEST(CgroupMode, NoneWhereNoCgroupIsMounted) {
  EXPECT_EQ(cgroup_mode("/nonexistent/mlbench/cgroup"), CgroupMode::None);
  const testing_support::TempDir dir("sysinfo");
  std::filesystem::create_directories(dir.path() / "cpuset");  // a plain folder, not a cgroup mount
  EXPECT_EQ(cgroup_mode(dir.path().string()), CgroupMode::None);
}

TEST(CpuList, FormatsRanges) {
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(format_cpu_list({6, 0, 1, 2, 3, 8, 9}), "0-3,6,8-9");
  EXPECT_EQ(format_cpu_list({5}), "5");
  EXPECT_EQ(format_cpu_list({}), "");
}

TEST(CpuList, ParsesWhatItFormats) {
  EXPECT_EQ(parse_cpu_list("0-3,6,8-9\n"), (std::vector<int>{0, 1, 2, 3, 6, 8, 9}));
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  EXPECT_THROW(parse_cpu_list("3-1"), std::invalid_argument);
  EXPECT_THROW(parse_cpu_list("a"), std::invalid_argument);
}

TEST(MachineDescription, HasEveryField) {
  const auto m = machine_description();
  for (const char* key : {"hostname", "cpu_model", "logical_cores", "physical_cores", "affinity", "memory_bytes",
                          "kernel", "cgroup_mode", "gpus"}) {
    EXPECT_TRUE(m.contains(key)) << key;
  }
  EXPECT_GE(m["logical_cores"].get<int>(), 1);
  EXPECT_GE(m["logical_cores"].get<int>(), m["physical_cores"].get<int>());
  EXPECT_GT(m["memory_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(parse_cpu_list(m["affinity"].get<std::string>()), affinity_cpus());
  const std::string mode = m["cgroup_mode"];
  EXPECT_TRUE(mode == "v1" || mode == "v2" || mode == "none") << mode;  // which one: CgroupMode tests above
}

}  // namespace
}  // namespace mlbench::core
