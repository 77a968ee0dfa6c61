// A benchmark's command line (docs/reliability.md, defect 18): a value that LibTorch cannot
// hold is refused by the flag's name, before any tensor exists.
#include <gtest/gtest.h>

#include "core/cli.h"

namespace mlbench::core {
namespace {

TEST(BenchCliMessages, BenchmarkCliPrintsOneLineNamingTheFlag) {
  BenchCli cli("b", "b", {});
  float lr = 0.1f;
  cli.add_option("--lr", lr, "learning rate")->check(number_above(0));
  const char* argv[] = {"b", "--lr", "1e300"};
  ::testing::internal::CaptureStderr();
  const auto rc = cli.parse(3, argv, {});
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 2);
  EXPECT_EQ(err, "b: error: --lr must be <= 3.40282e+38 (got 1e300) (see b --help)\n");
}

TEST(BenchCliMessages, SharedBenchmarkFlagsSayWhatIsWrong) {
  BenchCli cli("b", "b", {});
  const char* argv[] = {"b", "--batch-size", "abc"};
  ::testing::internal::CaptureStderr();
  const auto rc = cli.parse(3, argv, {});
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(err, "b: error: --batch-size must be an integer (got abc) (see b --help)\n");
}

}  // namespace
}  // namespace mlbench::core
