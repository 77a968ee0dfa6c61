#include "core/sysinfo.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

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
  EXPECT_TRUE(mode == "v1" || mode == "v2" || mode == "none") << mode;
}

}  // namespace
}  // namespace mlbench::core
