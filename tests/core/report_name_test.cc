#include "core/report_name.h"

#include <chrono>

#include <gtest/gtest.h>

namespace mlbench::core {
namespace {

TEST(ReportName, FollowsTheContract) {
  using namespace std::chrono;
  const auto when = sys_days{year{2026} / 11 / 22} + hours{3} + minutes{4} + seconds{5} + microseconds{123};
  EXPECT_EQ(report_file_name("mlbench", "toy_reg", 2, 1, false, when),
            "mlbench.toy_reg.R2.D1.20261122-030405-000123.json");
  EXPECT_EQ(report_file_name("s", "loader", 0, 3, true, when), "s.loader.R0.D3.FAIL.20261122-030405-000123.json");
  EXPECT_EQ(utc_iso8601(when), "2026-11-22T03:04:05.000123Z");
}

TEST(ReportName, TimestampsAreUtcWithMicroseconds) {
  using namespace std::chrono;
  EXPECT_EQ(utc_file_timestamp(system_clock::time_point{}), "19700101-000000-000000");
  EXPECT_EQ(utc_iso8601(system_clock::time_point{}), "1970-01-01T00:00:00.000000Z");
  const auto when = sys_days{year{2031} / 2 / 28} + hours{23} + minutes{59} + seconds{59} + microseconds{999999};
  EXPECT_EQ(utc_file_timestamp(when), "20310228-235959-999999");
  EXPECT_EQ(utc_iso8601(when), "2031-02-28T23:59:59.999999Z");
  // Finer than a microsecond is cut, not rounded up into the next second.
  EXPECT_EQ(utc_iso8601(time_point_cast<system_clock::duration>(when + nanoseconds{999})),
            "2031-02-28T23:59:59.999999Z");
}

}  // namespace
}  // namespace mlbench::core
