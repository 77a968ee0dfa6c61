#include "core/cli.h"

#include <gtest/gtest.h>

#include "core/calibration.h"
#include "core/nvtx.h"

#include <iostream>

namespace mlbench::core {
namespace {

struct Args {
  explicit Args(std::vector<std::string> a) : store(std::move(a)) {
    for (auto& s : store) ptrs.push_back(s.c_str());
  }
  int argc() const { return static_cast<int>(ptrs.size()); }
  const char* const* argv() const { return ptrs.data(); }
  std::vector<std::string> store;
  std::vector<const char*> ptrs;
};

BenchCli make_cli() { return BenchCli("toy", "toy benchmark", {.batch_size = 32, .repeat = 20, .number = 5}); }

TEST(BenchCli, DefaultsFromTheBenchmark) {
  BenchCli cli = make_cli();
  Args a({"toy"});
  EXPECT_FALSE(cli.parse(a.argc(), a.argv(), {}).has_value());
  const auto& o = cli.options();
  EXPECT_EQ(o.batch_size, 32);
  EXPECT_EQ(o.repeat, 20);
  EXPECT_EQ(o.number, 5);
  EXPECT_EQ(o.warmup, 10);  // min(10, repeat / 2)
  EXPECT_EQ(o.name, "toy");
  EXPECT_EQ(o.suite, "mlbench");
  EXPECT_GE(o.cpu_cores, 1);
  EXPECT_FALSE(o.cuda.has_value());
  EXPECT_EQ(o.data_directory, "data");
}

TEST(BenchCli, WarmupDefaultShrinksForShortRuns) {
  BenchCli cli = make_cli();
  Args a({"toy", "--repeat", "5"});
  ASSERT_FALSE(cli.parse(a.argc(), a.argv(), {}).has_value());
  EXPECT_EQ(cli.options().warmup, 2);
}

TEST(BenchCli, NvtxTurnsTheRangesOnWhereTheBuildHasNvtxElseItIsAnError) {
  BenchCli cli = make_cli();
  Args a({"toy", "--nvtx"});
  const auto rc = cli.parse(a.argc(), a.argv(), {});
  if (nvtx::available()) {
    EXPECT_FALSE(rc.has_value());
    EXPECT_TRUE(cli.options().nvtx);
    EXPECT_TRUE(nvtx::enabled());
    {
      nvtx::Range r("test");  // a push and a pop with no tool attached: returns
    }
    nvtx::enable(false);
  } else {
    std::cout << "this build has no NVTX3 header: --nvtx must be refused\n";
    ASSERT_TRUE(rc.has_value());
    EXPECT_EQ(*rc, 2);
    EXPECT_FALSE(nvtx::enabled());
  }
}

// A scaling rank under `srun --cpus-per-task=1` ran 2 threads (CPU_COUNT or the affinity said 2).
TEST(BenchCli, ThreadsFollowTheSlurmStepsCpusPerTask) {
  BenchCli cli = make_cli();
  Args a({"toy"});
  ASSERT_FALSE(cli.parse(a.argc(), a.argv(), {{"CPU_COUNT", "2"}, {"SLURM_CPUS_PER_TASK", "1"}}).has_value());
  EXPECT_EQ(cli.options().cpu_cores, 1);
  BenchCli given = make_cli();
  Args b({"toy", "--cpu-cores", "3"});  // the command line still wins
  ASSERT_FALSE(given.parse(b.argc(), b.argv(), {{"SLURM_CPUS_PER_TASK", "1"}}).has_value());
  EXPECT_EQ(given.options().cpu_cores, 3);
}

TEST(BenchCli, NvtxIsOffByDefault) {
  BenchCli cli = make_cli();
  Args a({"toy"});
  ASSERT_FALSE(cli.parse(a.argc(), a.argv(), {}).has_value());
  EXPECT_FALSE(cli.options().nvtx);
  EXPECT_FALSE(nvtx::enabled());
}

TEST(BenchCli, EnvironmentOverridesDefaults) {
  BenchCli cli = make_cli();
  Args a({"toy"});
  ASSERT_FALSE(cli.parse(a.argc(), a.argv(),
                         {{"JOB_ID", "3"},
                          {"CUDA_VISIBLE_DEVICES", "3"},
                          {"CPU_COUNT", "4"},
                          {"BENCH_NAME", "toy_x"},
                          {"RUN_ID", "7"},
                          {"SUITE_NAME", "nightly"},
                          {"OUTPUT_DIRECTORY", "/tmp/out"},
                          {"DATA_DIRECTORY", "/data"}})
                   .has_value());
  const auto& o = cli.options();
  EXPECT_EQ(o.jr_id, 3);
  EXPECT_EQ(o.vcd, "3");
  EXPECT_EQ(o.cpu_cores, 4);
  EXPECT_EQ(o.name, "toy_x");
  EXPECT_EQ(o.run_id, 7);
  EXPECT_EQ(o.suite, "nightly");
  EXPECT_EQ(o.report_dir, "/tmp/out");
  EXPECT_EQ(o.data_directory, "/data");
}

TEST(BenchCli, FlagsWinOverEnvironment) {
  BenchCli cli = make_cli();
  Args a({"toy", "--cpu-cores", "2", "--jr-id", "1", "--report", "here"});
  ASSERT_FALSE(
      cli.parse(a.argc(), a.argv(), {{"CPU_COUNT", "8"}, {"JOB_ID", "5"}, {"OUTPUT_DIRECTORY", "there"}}).has_value());
  EXPECT_EQ(cli.options().cpu_cores, 2);
  EXPECT_EQ(cli.options().jr_id, 1);
  EXPECT_EQ(cli.options().report_dir, "here");
}

// The help once read "none: stdout", and --report none wrote into a directory named "none".
TEST(BenchCli, ReportDashPrintsToStdoutEvenWithOutputDirectorySet) {
  BenchCli cli = make_cli();
  Args a({"toy", "--report", "-"});
  ASSERT_FALSE(cli.parse(a.argc(), a.argv(), {{"OUTPUT_DIRECTORY", "there"}}).has_value());
  EXPECT_EQ(cli.options().report_dir, "");
  BenchCli helped = make_cli();
  Args h({"toy", "--help"});
  testing::internal::CaptureStdout();
  ASSERT_EQ(helped.parse(h.argc(), h.argv(), {}), 0);
  const std::string help = testing::internal::GetCapturedStdout();
  EXPECT_NE(help.find("-: stdout"), std::string::npos) << help;
  EXPECT_EQ(help.find("none: stdout"), std::string::npos) << help;
}

TEST(BenchCli, BadValuesExitTwo) {
  for (const auto& argv : std::vector<std::vector<std::string>>{{"toy", "--batch-size", "abc"},
                                                                {"toy", "--batch-size", "0"},
                                                                {"toy", "--repeat", "-1"},
                                                                {"toy", "--no-such-flag"},
                                                                {"toy", "--cuda", "--no-cuda"},
                                                                {"toy", "--repeat", "3", "--warmup", "3"}}) {
    BenchCli cli = make_cli();
    Args a(argv);
    testing::internal::CaptureStderr();
    const auto rc = cli.parse(a.argc(), a.argv(), {});
    const std::string err = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(rc.has_value()) << argv.back();
    EXPECT_EQ(*rc, 2) << argv.back();
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find("toy: error:"), std::string::npos) << err;
  }
}

TEST(BenchCli, BadEnvironmentValueNamesTheVariable) {
  BenchCli cli = make_cli();
  Args a({"toy"});
  testing::internal::CaptureStderr();
  const auto rc = cli.parse(a.argc(), a.argv(), {{"CPU_COUNT", "many"}});
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 2);
  EXPECT_NE(err.find("CPU_COUNT"), std::string::npos);
}

TEST(BenchCli, HelpListsSharedAndOwnFlagsAndExitsZero) {
  BenchCli cli = make_cli();
  int depth = 3;
  cli.add_option("--depth", depth, "Model depth");
  Args a({"toy", "--help"});
  testing::internal::CaptureStdout();
  const auto rc = cli.parse(a.argc(), a.argv(), {});
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 0);
  for (const char* flag : {"--batch-size", "--workers", "--repeat", "--number", "--seed", "--cuda", "--no-cuda",
                           "--report", "--data", "--synthetic", "--cpu-cores", "--jr-id", "--vcd", "--trace",
                           "--monitor-interval", "--depth", "--no-device-events", "CPU_COUNT"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  }
}

TEST(BenchCli, CudaFlags) {
  BenchCli a_cli = make_cli();
  Args a({"toy", "--no-cuda"});
  ASSERT_FALSE(a_cli.parse(a.argc(), a.argv(), {}).has_value());
  EXPECT_EQ(a_cli.options().cuda, std::optional<bool>(false));
  BenchCli b_cli = make_cli();
  Args b({"toy", "--cuda"});
  ASSERT_FALSE(b_cli.parse(b.argc(), b.argv(), {}).has_value());
  EXPECT_EQ(b_cli.options().cuda, std::optional<bool>(true));
}

TEST(BenchCli, DeviceEventsAreOnUnlessTurnedOff) {
  BenchCli a_cli = make_cli();
  Args a({"toy"});
  ASSERT_FALSE(a_cli.parse(a.argc(), a.argv(), {}).has_value());
  EXPECT_TRUE(a_cli.options().device_events);
  BenchCli b_cli = make_cli();
  Args b({"toy", "--no-device-events"});
  ASSERT_FALSE(b_cli.parse(b.argc(), b.argv(), {}).has_value());
  EXPECT_FALSE(b_cli.options().device_events);
  EXPECT_EQ(b_cli.args_json()["no_device_events"], true);
}

TEST(BenchCli, MonitorIntervalDefaultsToOneSecondAndZeroTurnsItOff) {
  BenchCli a_cli = make_cli();
  Args a({"toy"});
  ASSERT_FALSE(a_cli.parse(a.argc(), a.argv(), {}).has_value());
  EXPECT_EQ(a_cli.options().monitor_interval, 1.0);
  EXPECT_EQ(a_cli.args_json()["monitor_interval"], 1.0);
  BenchCli b_cli = make_cli();
  Args b({"toy", "--monitor-interval", "0.25"});
  ASSERT_FALSE(b_cli.parse(b.argc(), b.argv(), {}).has_value());
  EXPECT_EQ(b_cli.options().monitor_interval, 0.25);
  BenchCli off_cli = make_cli();
  Args off({"toy", "--monitor-interval", "0"});
  ASSERT_FALSE(off_cli.parse(off.argc(), off.argv(), {}).has_value());
  EXPECT_EQ(off_cli.options().monitor_interval, 0.0);
  // Watching the GPU does not change the workload.
  EXPECT_EQ(a_cli.unique_id(), b_cli.unique_id());
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"toy", "--monitor-interval", "-1"}, {"toy", "--monitor-interval", "abc"}, {"toy", "--monitor-interval"}}) {
    BenchCli cli = make_cli();
    Args bad(argv);
    testing::internal::CaptureStderr();
    const auto rc = cli.parse(bad.argc(), bad.argv(), {});
    const std::string err = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(rc.has_value()) << argv.back();
    EXPECT_EQ(*rc, 2) << argv.back();
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find("--monitor-interval"), std::string::npos) << err;
  }
  BenchCli neg_cli = make_cli();
  Args neg({"toy", "--monitor-interval", "-1"});
  testing::internal::CaptureStderr();
  neg_cli.parse(neg.argc(), neg.argv(), {});
  EXPECT_NE(testing::internal::GetCapturedStderr().find("--monitor-interval must be >= 0 (got -1)"), std::string::npos);
}

TEST(BenchCli, ArgsJsonHoldsEveryOption) {
  BenchCli cli = make_cli();
  int depth = 3;
  cli.add_option("--depth", depth, "Model depth");
  Args a({"toy", "--depth", "5", "-b", "64"});
  ASSERT_FALSE(cli.parse(a.argc(), a.argv(), {}).has_value());
  const auto args = cli.args_json();
  EXPECT_EQ(args["depth"], 5);
  EXPECT_EQ(args["batch_size"], 64);
  EXPECT_TRUE(args.contains("workers"));
  EXPECT_TRUE(args["cuda"].is_null());
  EXPECT_FALSE(args.contains("no_cuda"));
}

std::string uid_of(std::vector<std::string> argv, std::map<std::string, std::string> env = {}) {
  BenchCli cli = make_cli();
  int depth = 3;
  cli.add_option("--depth", depth, "Model depth");
  Args a(std::move(argv));
  EXPECT_FALSE(cli.parse(a.argc(), a.argv(), env).has_value());
  return cli.unique_id();
}

TEST(BenchCli, UniqueIdIgnoresRuntimeArgumentsOnly) {
  const std::string base = uid_of({"toy"});
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(base, uid_of({"toy"}));
  // Runtime-only: seed, workers, report, jr_id, vcd, cpu cores, data, trace, suite, run id.
  EXPECT_EQ(base, uid_of({"toy", "--seed", "9", "-j", "4", "--report", "x", "--jr-id", "2", "--vcd", "1",
                          "--cpu-cores", "1", "--data", "/d", "--trace", "t.json", "--suite", "s", "--run-id", "3"}));
  EXPECT_EQ(base, uid_of({"toy"}, {{"JOB_ID", "1"}, {"BENCH_NAME", "other"}}));
  // Workload arguments change it.
  EXPECT_NE(base, uid_of({"toy", "--depth", "4"}));
  EXPECT_NE(base, uid_of({"toy", "-b", "33"}));
  EXPECT_NE(base, uid_of({"toy", "--synthetic"}));
}

TEST(Sha256, KnownDigest) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(BenchCli, MinTimeIsOffByDefaultAndTakesAValue) {
  {
    BenchCli cli = make_cli();
    Args a({"toy"});
    ASSERT_FALSE(cli.parse(a.argc(), a.argv(), {}).has_value());
    EXPECT_EQ(cli.options().min_time, 0.0);
    EXPECT_EQ(cli.options().number, 5);
    EXPECT_TRUE(cli.args_json()["min_time"].is_null());
    EXPECT_EQ(cli.args_json()["number"], 5);
  }
  {
    BenchCli cli = make_cli();
    Args a({"toy", "--min-time", "0.5"});
    ASSERT_FALSE(cli.parse(a.argc(), a.argv(), {}).has_value());
    EXPECT_EQ(cli.options().min_time, 0.5);
    EXPECT_EQ(cli.args_json()["min_time"], 0.5);
    EXPECT_TRUE(cli.args_json()["number"].is_null());  // calibrated: the report's number says which
  }
}

TEST(BenchCli, MinTimeWithoutValueIsTheDefault) {
  BenchCli cli = make_cli();
  Args a({"toy", "--min-time", "--repeat", "4"});
  ASSERT_FALSE(cli.parse(a.argc(), a.argv(), {}).has_value());
  EXPECT_EQ(cli.options().min_time, kDefaultMinTime);
  EXPECT_EQ(cli.options().repeat, 4);
  BenchCli last = make_cli();
  Args at_end({"toy", "--min-time"});
  ASSERT_FALSE(last.parse(at_end.argc(), at_end.argv(), {}).has_value());
  EXPECT_EQ(last.options().min_time, kDefaultMinTime);
  BenchCli off = make_cli();
  Args zero({"toy", "--min-time", "0"});
  ASSERT_FALSE(off.parse(zero.argc(), zero.argv(), {}).has_value());
  EXPECT_EQ(off.options().min_time, 0.0);
  EXPECT_EQ(off.options().number, 5);
}

TEST(BenchCli, ExplicitNumberKeepsItsMeaningAndExcludesMinTime) {
  {
    BenchCli cli = make_cli();
    Args a({"toy", "--number", "9"});
    ASSERT_FALSE(cli.parse(a.argc(), a.argv(), {}).has_value());
    EXPECT_EQ(cli.options().number, 9);
    EXPECT_EQ(cli.options().min_time, 0.0);
  }
  for (const auto& argv : std::vector<std::vector<std::string>>{{"toy", "--number", "9", "--min-time", "0.2"},
                                                                {"toy", "--min-time", "-1"},
                                                                {"toy", "--min-time", "abc"}}) {
    BenchCli cli = make_cli();
    Args a(argv);
    testing::internal::CaptureStderr();
    const auto rc = cli.parse(a.argc(), a.argv(), {});
    const std::string err = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(rc.has_value()) << argv.back();
    EXPECT_EQ(*rc, 2);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find("--min-time"), std::string::npos) << err;
  }
}

TEST(BenchCli, MinTimeDoesNotChangeTheUniqueId) {
  EXPECT_EQ(uid_of({"toy"}), uid_of({"toy", "--min-time", "0.3"}));
}

}  // namespace
}  // namespace mlbench::core
