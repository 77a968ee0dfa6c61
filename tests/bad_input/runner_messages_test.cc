// mlbench-run's messages (docs/reliability.md): a benchmark's own reason on the FAILED line
// (defect 13) and integers of a jobs file passed as written (defect 23).
#include <gtest/gtest.h>

#include "runner/jobs.h"
#include "runner/outcome.h"

namespace mlbench::runner {
namespace {

TEST(RunnerMessages, NonZeroExitShowsTheBenchmarksOwnReason) {
  EndFacts f;
  f.exited = true;
  f.exit_code = 1;
  f.has_report = true;
  f.report_completed = false;
  f.report_reason = "loss is nan at repeat 0 iteration 3";
  EXPECT_EQ(decide_outcome(f).reason, "exit 1: loss is nan at repeat 0 iteration 3");
  f.report_reason.clear();  // a report without a reason: the exit code alone
  EXPECT_EQ(decide_outcome(f).reason, "exit 1");
}

std::string jobs_error(const std::string& text) {
  try {
    parse_jobs(text, "x.json");
  } catch (const JobsError& e) {
    return e.what();
  }
  return {};
}

TEST(RunnerMessages, AnIntegerBeyond64BitsIsRefusedNotRewritten) {
  const std::string err = jobs_error(R"([{"name": "a", "cmd": "a", "args": {"--repeat": 100000000000000000000}}])");
  EXPECT_NE(err.find("x.json: job 0 (a): field 'args.--repeat': the number 1e+20 is too large"), std::string::npos)
      << err;
  const std::string sweep =
      jobs_error(R"([{"name": "a", "cmd": "a", "args": {"--repeat": [1, 99999999999999999999]}}])");
  EXPECT_NE(sweep.find("field 'args.--repeat'"), std::string::npos) << sweep;
}

// A float written with an exponent ("--lr": 1e38) was refused as "integers must fit 64 bits".
TEST(RunnerMessages, AFloatWrittenAsAFloatIsPassedHoweverLarge) {
  const auto jobs = parse_jobs(R"([{"name": "a", "cmd": "a", "args": {"--lr": 1e38, "--x": 1e19, "--y": [2.5e19]}}])",
                               "x.json");
  ASSERT_EQ(jobs.size(), 1u);
  const auto points = sweep_points(jobs[0], {}, "x.json");
  ASSERT_EQ(points.size(), 1u);
  ASSERT_EQ(points[0].argv.size(), 6u);
  EXPECT_EQ(std::stod(points[0].argv[1]), 1e38);
  EXPECT_EQ(std::stod(points[0].argv[3]), 1e19);
  EXPECT_EQ(std::stod(points[0].argv[5]), 2.5e19);
  // The same value written as an integer literal is still refused.
  EXPECT_NE(jobs_error(R"([{"name": "a", "cmd": "a", "args": {"--x": 10000000000000000000000}}])").find("too large"),
            std::string::npos);
}

TEST(RunnerMessages, IntegersThatFitArePassedAsWritten) {
  const auto jobs = parse_jobs(
      R"([{"name": "a", "cmd": "a", "args": {"--seed": 18446744073709551615, "--n": -9223372036854775808, "--lr": 0.1,
                                             "--big": "100000000000000000000"}}])",
      "x.json");
  ASSERT_EQ(jobs.size(), 1u);
  const auto points = sweep_points(jobs[0], {}, "x.json");
  ASSERT_EQ(points.size(), 1u);
  const std::vector<std::string> want{"--seed", "18446744073709551615", "--n", "-9223372036854775808", "--lr", "0.1",
                                      "--big",  "100000000000000000000"};
  EXPECT_EQ(points[0].argv, want);
}

}  // namespace
}  // namespace mlbench::runner
