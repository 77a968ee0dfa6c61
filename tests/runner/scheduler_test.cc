// The scheduler through the fake launcher: outcomes of a step's instances
// (pass, crash, timeout, OOM, launch failure, Ctrl-C), the reports and the lines
// it leaves, --resume and --raise-error. Virtual time: nothing sleeps.
#include "runner/scheduler.h"

#include <signal.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/reports.h"
#include "tests/runner/fake_launcher.h"
#include "tests/support/temp_dir.h"

namespace mlbench::runner {
namespace {

namespace fs = std::filesystem;
using testing::FakeBehaviour;
using testing::FakeLauncher;

// A behaviour: the default with `change` applied (designated initializers would do,
// but GCC 12 warns about the fields they leave out).
template <typename Change>
FakeBehaviour fake(Change change) {
  FakeBehaviour b;
  change(b);
  return b;
}

template <typename Change>
SchedulerOptions options(Change change) {
  SchedulerOptions o;
  change(o);
  return o;
}

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : output_(text_, false) {
    settings_.suite = "s";
    settings_.output_directory = dir_.path().string();
    settings_.default_timeout = 100;
  }

  // One step of job `name` on `slots` slots.
  std::vector<PlannedStep> plan(int slots, const std::string& name = "j", std::optional<double> timeout = {}) {
    JobSpec job;
    job.name = name;
    job.cmd = "fake";
    job.timeout = timeout;
    jobs_.push_back(job);
    job.index = 0;
    const auto s = make_slots({0, 1, 2, 3}, 4ull << 30, slots, std::nullopt);  // 3 slots: 1.3 GiB each
    return make_plan({job}, {"/bin/fake"}, s, settings_, {}, "jobs.json");
  }

  StepResult run_step(const PlannedStep& step, SchedulerOptions options = {}) {
    options.kill_grace = 3;
    Scheduler scheduler(launcher_, output_, options);
    const StepResult r = scheduler.run_step(step, jobs_.back(), {1, 1, launcher_.now()}, dir_.path(), settings_);
    interrupted_ = scheduler.interrupted();
    return r;
  }

  // The final report of `inst` (exactly one must exist).
  nlohmann::json report(const Instance& inst) {
    const auto files = list_reports(dir_.path(), inst.report_prefix);
    EXPECT_EQ(files.size(), 1u) << inst.report_prefix;
    if (files.empty()) return {};
    auto r = *read_report(*files.begin());
    r["_file"] = files.begin()->filename().string();
    return r;
  }

  mlbench::testing_support::TempDir dir_{"scheduler"};
  std::ostringstream text_;
  Output output_;
  FakeLauncher launcher_;
  PlanSettings settings_;
  std::vector<JobSpec> jobs_;
  bool interrupted_ = false;
};

TEST_F(SchedulerTest, AllInstancesPass) {
  const auto steps = plan(3);
  launcher_.script = [](const LaunchRequest&) { return fake([](FakeBehaviour& b) { b.runs_for = 2; }); };
  const StepResult r = run_step(steps[0]);
  EXPECT_EQ(r.passed, 3);
  EXPECT_EQ(r.failed, 0);
  EXPECT_FALSE(r.all_resumed);
  ASSERT_EQ(launcher_.started.size(), 3u);
  EXPECT_TRUE(launcher_.signals.empty());
  for (const auto& inst : steps[0].instances) {
    const auto rep = report(inst);
    EXPECT_EQ(rep["completed"], true);
    EXPECT_EQ(rep["isolation"], "fake");
    EXPECT_EQ(rep["runner"]["slot"], inst.slot);
    EXPECT_DOUBLE_EQ(rep["runner"]["wall_seconds"].get<double>(), 2.0);
    EXPECT_EQ(rep["resources"]["source"], "fake");
  }
  const LaunchRequest& req = launcher_.started[1];
  EXPECT_EQ(req.slot, 1);
  EXPECT_EQ(req.cgroup, "student1");
  EXPECT_EQ(req.cpus, std::vector<int>{1});
  EXPECT_EQ(req.env.at("JOB_ID"), "1");
  EXPECT_EQ(req.log, dir_.path() / "j.R0.D1.log");
  EXPECT_EQ(req.log_header.rfind("# slot 1 | cpus 1 | memory 1.3 GiB | ", 0), 0u) << req.log_header;
  EXPECT_EQ(text_.str(), "[1/1] j: starting 3 instance(s)\n");
}

TEST_F(SchedulerTest, OneCrashesTheOthersKeepTheirResults) {
  const auto steps = plan(3);
  launcher_.script = [](const LaunchRequest& r) {
    return r.slot != 1 ? FakeBehaviour{} : fake([](FakeBehaviour& b) {
      b.runs_for = 0.5;
      b.signal = SIGSEGV;
      b.writes_report = false;
    });
  };
  const StepResult r = run_step(steps[0]);
  EXPECT_EQ(r.passed, 2);
  EXPECT_EQ(r.failed, 1);
  const auto crashed = report(steps[0].instances[1]);
  EXPECT_EQ(crashed["completed"], false);
  EXPECT_EQ(crashed["reason"], "signal 11");
  EXPECT_EQ(crashed["runner"]["signal"], SIGSEGV);
  EXPECT_TRUE(crashed["runner"]["exit_code"].is_null());
  EXPECT_NE(crashed["_file"].get<std::string>().find(".FAIL."), std::string::npos);
  EXPECT_EQ(report(steps[0].instances[0])["completed"], true);
  EXPECT_EQ(report(steps[0].instances[2])["completed"], true);
  EXPECT_NE(text_.str().find("  j slot 1: FAILED (signal 11), log: " + (dir_.path() / "j.R0.D1.log").string()),
            std::string::npos)
      << text_.str();
}

TEST_F(SchedulerTest, ExitCodeAndMissingReportAndOwnFailure) {
  const auto steps = plan(3);
  launcher_.script = [](const LaunchRequest& r) {
    if (r.slot == 0) return fake([](FakeBehaviour& b) { b.exit_code = 3; b.writes_report = false; });
    if (r.slot == 1) return fake([](FakeBehaviour& b) { b.writes_report = false; });
    return fake([](FakeBehaviour& b) { b.report_completed = false; });
  };
  EXPECT_EQ(run_step(steps[0]).failed, 3);
  EXPECT_EQ(report(steps[0].instances[0])["reason"], "exit 3");
  EXPECT_EQ(report(steps[0].instances[0])["runner"]["exit_code"], 3);
  EXPECT_EQ(report(steps[0].instances[1])["reason"], "no report");
  EXPECT_EQ(report(steps[0].instances[2])["reason"], "loss is NaN");
}

TEST_F(SchedulerTest, TimeoutIsTermThenKillAfterTheGrace) {
  const auto steps = plan(2, "hang", 5.0);
  launcher_.script = [](const LaunchRequest& r) {
    return fake([&](FakeBehaviour& b) {
      b.runs_for = FakeBehaviour::kForever;
      b.ignores_term = r.slot == 1;
    });
  };
  const double t0 = launcher_.now();
  const StepResult r = run_step(steps[0]);
  EXPECT_EQ(r.failed, 2);
  for (const auto& inst : steps[0].instances) EXPECT_EQ(report(inst)["reason"], "timeout 5s");
  using Signal = std::pair<Launcher::Id, int>;
  EXPECT_EQ(launcher_.signals, (std::vector<Signal>{{0, SIGTERM}, {1, SIGTERM}, {1, SIGKILL}}));
  EXPECT_DOUBLE_EQ(launcher_.now() - t0, 5.0 + 3.0);  // the deadline, then the grace for the stubborn one
  EXPECT_DOUBLE_EQ(report(steps[0].instances[0])["runner"]["wall_seconds"].get<double>(), 5.0);
}

TEST_F(SchedulerTest, OomAndLaunchFailureAreFailReasons) {
  const auto steps = plan(2);
  launcher_.script = [](const LaunchRequest& r) {
    if (r.slot == 1) return fake([](FakeBehaviour& b) { b.launch_error = "boom"; });
    return fake([](FakeBehaviour& b) {
      b.signal = SIGKILL;
      b.writes_report = false;
      b.oom_kills = 1;
    });
  };
  EXPECT_EQ(run_step(steps[0]).failed, 2);
  EXPECT_EQ(report(steps[0].instances[0])["reason"], "oom");
  const auto failed = report(steps[0].instances[1]);
  EXPECT_EQ(failed["reason"], "launch failed: boom");
  EXPECT_FALSE(failed.contains("resources") && !failed["resources"].is_null()) << "it never ran";
  EXPECT_DOUBLE_EQ(failed["runner"]["wall_seconds"].get<double>(), 0.0);
}

TEST_F(SchedulerTest, CtrlCInterruptsEveryInstance) {
  const auto steps = plan(2);
  launcher_.script = [](const LaunchRequest&) {
    return fake([](FakeBehaviour& b) { b.runs_for = FakeBehaviour::kForever; });
  };
  launcher_.interrupt_at = launcher_.now() + 1;
  const StepResult r = run_step(steps[0]);
  EXPECT_TRUE(interrupted_);
  EXPECT_EQ(r.failed, 2);
  for (const auto& inst : steps[0].instances) EXPECT_EQ(report(inst)["reason"], "interrupted");
  EXPECT_EQ(launcher_.signals.size(), 2u);
  EXPECT_EQ(launcher_.signals[0].second, SIGINT);
  EXPECT_NE(text_.str().find("mlbench-run: interrupted;"), std::string::npos) << text_.str();
}

TEST_F(SchedulerTest, ResumeSkipsCompletedInstances) {
  const auto steps = plan(2);
  run_step(steps[0]);  // both complete
  launcher_.started.clear();
  const StepResult again = run_step(steps[0], options([&](SchedulerOptions& o) { o.resume = true; }));
  EXPECT_TRUE(again.all_resumed);
  EXPECT_EQ(again.passed, 2);
  EXPECT_TRUE(launcher_.started.empty());

  fs::remove(*completed_report(dir_.path(), steps[0].instances[1]));
  const StepResult partly = run_step(steps[0], options([&](SchedulerOptions& o) { o.resume = true; }));
  EXPECT_FALSE(partly.all_resumed);
  EXPECT_EQ(partly.passed, 2);
  ASSERT_EQ(launcher_.started.size(), 1u);
  EXPECT_EQ(launcher_.started[0].slot, 1);
}

TEST_F(SchedulerTest, MissingDatagenFailsTheStepWithoutLaunching) {
  auto steps = plan(1);
  jobs_.back().dataset = "tiny";
  const StepResult r =
      run_step(steps[0], options([&](SchedulerOptions& o) { o.datagen = dir_.path() / "no-datagen"; }));
  EXPECT_EQ(r.failed, 1);
  EXPECT_TRUE(launcher_.started.empty());
  EXPECT_EQ(report(steps[0].instances[0])["reason"].get<std::string>().rfind("dataset tiny: mlbench-datagen not found", 0),
            0u);
}

TEST_F(SchedulerTest, RaiseErrorStopsThePassAndTheSummarySaysSo) {
  auto bad = plan(1, "bad");
  auto good = plan(1, "good");
  for (auto& s : good) s.job = 1;
  for (auto& s : good) bad.push_back(s);
  launcher_.script = [](const LaunchRequest& r) {
    if (r.env.at("BENCH_NAME") != "bad") return FakeBehaviour{};
    return fake([](FakeBehaviour& b) {
      b.exit_code = 2;
      b.writes_report = false;
    });
  };
  Scheduler scheduler(launcher_, output_, options([&](SchedulerOptions& o) { o.raise_error = true; }));
  int prepared = 0;
  const int failed = scheduler.run({Pass{0, dir_.path(), settings_, bad}}, jobs_, [&](const Pass&) { ++prepared; });
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(prepared, 1);
  EXPECT_TRUE(scheduler.stopped());
  ASSERT_EQ(launcher_.started.size(), 1u);
  std::ifstream in(dir_.path() / "summary.txt");
  std::string first, total;
  std::getline(in, first);
  std::getline(in, total);
  EXPECT_EQ(first, "[ 1/ 2][ 1/ 1] FAILED |     0.02 MIN | bad") << first;
  EXPECT_EQ(total.rfind("Total Time", 0), 0u) << total;
}

}  // namespace
}  // namespace mlbench::runner
