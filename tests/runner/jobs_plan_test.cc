// Jobs-file parsing/validation, $VAR and sweep expansion, slots, plan, outcomes
// and status lines: pure functions, numbers and text in and out.
#include <gtest/gtest.h>

#include "runner/jobs.h"
#include "runner/outcome.h"
#include "runner/plan.h"

using namespace mlbench::runner;

namespace {
std::string error_of(const std::string& text) {
  try {
    parse_jobs(text, "x.json");
  } catch (const JobsError& e) {
    return e.what();
  }
  return "";
}
const std::map<std::string, std::string> kEnv = {{"DATA_DIRECTORY", "/d"}, {"BASE", "/b"}};
}  // namespace

TEST(Jobs, ParsesMilaEntry) {
  auto jobs = parse_jobs(R"([{"name": "loader", "cmd": "loader",
    "args": {"--data": "$DATA_DIRECTORY/fake", "--workers": 8, "--no-cuda": "", "--lr": 0.5},
    "cgroup": "student", "timeout": 60, "dataset": "fake-imagenet-small", "tags": ["io"]},
    {"name": "all", "cmd": "./x", "args": {}, "cgroup": "all"}])",
                         "x.json");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].name, "loader");
  EXPECT_EQ(*jobs[0].timeout, 60);
  EXPECT_EQ(*jobs[0].dataset, "fake-imagenet-small");
  EXPECT_EQ(jobs[1].cgroup, CgroupKind::All);
  auto points = sweep_points(jobs[0], kEnv, "x.json");
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].argv, (std::vector<std::string>{"--data", "/d/fake", "--workers", "8", "--no-cuda", "--lr", "0.5"}));
  EXPECT_EQ(points[0].label, "");
}

TEST(Jobs, Errors) {
  EXPECT_NE(error_of("{").find("x.json: not valid JSON"), std::string::npos);
  EXPECT_EQ(error_of("{}"), "x.json: expected a JSON array of jobs, got an object");
  EXPECT_EQ(error_of(R"([{"name": "a", "args": {}}])"), "x.json: job 0 (a): field 'cmd': missing required field");
  EXPECT_EQ(error_of(R"([{"cmd": "a", "args": {}}])"), "x.json: job 0: field 'name': missing required field");
  EXPECT_EQ(error_of(R"([{"name": "a", "cmd": "a", "args": {"--x": true}}])"),
            "x.json: job 0 (a): field 'args.--x': expected a number, a string or a list, got true");
  EXPECT_EQ(error_of(R"([{"name": "a", "cmd": "a", "args": {}, "cgroup": "gpu"}])"),
            "x.json: job 0 (a): field 'cgroup': expected \"student\" or \"all\", got \"gpu\"");
  EXPECT_EQ(error_of(R"([{"name": "a", "cmd": "a", "args": {}, "bogus": 1}])"), "x.json: job 0 (a): field 'bogus': unknown field");
  EXPECT_EQ(error_of(R"([{"name": "a", "cmd": "a", "args": {}}, {"name": "a", "cmd": "b", "args": {}}])"),
            "x.json: job 1 (a): field 'name': duplicate job name");
  EXPECT_EQ(error_of(R"([{"name": "a", "cmd": "a", "args": {}, "timeout": -1}])"),
            "x.json: job 0 (a): field 'timeout': expected a positive number of seconds, got -1");
  EXPECT_EQ(error_of(R"([{"name": "a", "cmd": "a", "args": {"--b": []}}])"),
            "x.json: job 0 (a): field 'args.--b': a sweep list must not be empty");
}

TEST(Jobs, SweepIsCartesianFirstListSlowest) {
  auto jobs = parse_jobs(R"([{"name": "s", "cmd": "s", "args": {"--b": [1, 2], "--fixed": "f", "--w": [3, 4, 5]}}])", "x.json");
  auto points = sweep_points(jobs[0], kEnv, "x.json");
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0].argv, (std::vector<std::string>{"--b", "1", "--fixed", "f", "--w", "3"}));
  EXPECT_EQ(points[1].argv, (std::vector<std::string>{"--b", "1", "--fixed", "f", "--w", "4"}));
  EXPECT_EQ(points[3].argv, (std::vector<std::string>{"--b", "2", "--fixed", "f", "--w", "3"}));
  EXPECT_EQ(points[5].label, "--b 2 --w 5");
}

TEST(Jobs, ExpandVars) {
  EXPECT_EQ(expand_vars("$BASE/x/${DATA_DIRECTORY}y$$", kEnv, "w"), "/b/x//dy$");
  EXPECT_THROW(expand_vars("$NOPE", kEnv, "w"), JobsError);
  try {
    expand_vars("$NOPE/x", kEnv, "x.json: job 0 (a): field 'args.--data'");
  } catch (const JobsError& e) {
    EXPECT_STREQ(e.what(), "x.json: job 0 (a): field 'args.--data': $NOPE is not set");
  }
}

TEST(Jobs, Select) {
  auto jobs = parse_jobs(R"([{"name": "a", "cmd": "a", "args": {}}, {"name": "b", "cmd": "b", "args": {}},
                             {"name": "c", "cmd": "c", "args": {}}])", "x.json");
  EXPECT_EQ(select_jobs(jobs, {"c", "a"}, {}, "x.json").size(), 2u);
  EXPECT_EQ(select_jobs(jobs, {}, {"b"}, "x.json")[1].name, "c");
  EXPECT_THROW(select_jobs(jobs, {"zz"}, {}, "x.json"), JobsError);
  EXPECT_EQ(split_list("a, b,,c"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Plan, SlotsContiguous) {
  auto slots = make_slots({0, 1, 2, 3, 4, 5, 6, 7}, 8000, 4, std::nullopt);
  ASSERT_EQ(slots.size(), 4u);
  EXPECT_EQ(slots[1].cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(*slots[3].memory_bytes, 2000u);
  auto odd = make_slots({0, 1, 2}, 900, 2, 100);
  EXPECT_EQ(odd[1].cpus, (std::vector<int>{1}));  // remainder unused, as CPU_COUNT*i..
  EXPECT_EQ(*odd[0].memory_bytes, 100u);
  auto many = make_slots({4, 5}, 1000, 5, std::nullopt);
  EXPECT_EQ(many[4].cpus, (std::vector<int>{4}));  // more slots than CPUs: shared round-robin
  EXPECT_EQ(default_slot_count(0, 2), 1);
  EXPECT_EQ(default_slot_count(0, 16), 8);
  EXPECT_EQ(default_slot_count(4, 16), 4);
}

TEST(Plan, InstancesEnvSeedsAndNames) {
  auto jobs = parse_jobs(R"([{"name": "a", "cmd": "a", "args": {"-b": [1, 2]}},
                             {"name": "w", "cmd": "w", "args": {}, "cgroup": "all", "timeout": 5}])", "x.json");
  PlanSettings s;
  s.suite = "fast";
  s.run_id = 3;
  s.uid = 3;
  s.gpus = 2;
  s.output_directory = "/o";
  s.data_directory = "/d";
  s.all_cpus = {0, 1, 2, 3};
  auto plan = make_plan(jobs, {"/bin/a", "/bin/w"}, make_slots({0, 1, 2, 3}, 4000, 2, std::nullopt), s, kEnv, "x.json");
  ASSERT_EQ(plan.size(), 3u);
  const Instance& i1 = plan[1].instances[1];
  EXPECT_EQ(plan[1].title, "a [-b 2]");
  EXPECT_EQ(i1.argv, (std::vector<std::string>{"-b", "2", "--seed", "203"}));
  EXPECT_EQ(i1.env.at("JOB_ID"), "1");
  EXPECT_EQ(i1.env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(i1.env.at("CPU_COUNT"), "2");
  EXPECT_EQ(i1.env.at("OMP_NUM_THREADS"), "2");  // the BLAS's pool follows the slot, too
  EXPECT_EQ(i1.env.at("OPENBLAS_NUM_THREADS"), "2");
  EXPECT_EQ(i1.env.at("RUN_ID"), "3");
  EXPECT_EQ(i1.env.at("SUITE_NAME"), "fast");
  EXPECT_EQ(i1.cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(i1.log_name, "a.S1.R3.D1.log");
  EXPECT_EQ(i1.report_prefix, "fast.a.R3.D1.");
  EXPECT_EQ(i1.cgroup, "student1");
  const Instance& w = plan[2].instances.at(0);
  ASSERT_EQ(plan[2].instances.size(), 1u);
  EXPECT_EQ(w.seed, 5);  // uid + slots
  EXPECT_EQ(w.env.at("CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(w.cpus.size(), 4u);
  EXPECT_FALSE(w.memory_bytes.has_value());
  EXPECT_EQ(w.timeout, 5);
  EXPECT_EQ(w.log_name, "w.R3.D0.log");
}

TEST(Plan, Sizes) {
  EXPECT_EQ(parse_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_size("1000"), 1000u);
  EXPECT_THROW(parse_size("12X"), std::invalid_argument);
  EXPECT_THROW(parse_size("abc"), std::invalid_argument);
  EXPECT_EQ(format_bytes(std::nullopt), "unlimited");
  EXPECT_EQ(format_bytes(512ull << 20), "512 MiB");
}

TEST(Outcome, Precedence) {
  EndFacts f;
  f.exited = true;
  f.has_report = true;
  f.report_completed = true;
  EXPECT_TRUE(decide_outcome(f).passed);
  f.report_completed = false;
  f.report_reason = "loss is NaN";
  EXPECT_EQ(decide_outcome(f).reason, "loss is NaN");
  f.has_report = false;
  EXPECT_EQ(decide_outcome(f).reason, "no report");
  f.exit_code = 3;
  EXPECT_EQ(decide_outcome(f).reason, "exit 3");
  f.exited = false;
  f.signal = 11;
  EXPECT_EQ(decide_outcome(f).reason, "signal 11");
  f.oom_kills = 1;
  EXPECT_EQ(decide_outcome(f).reason, "oom");
  f.timed_out = true;
  f.timeout = 1800;
  EXPECT_EQ(decide_outcome(f).reason, "timeout 1800s");
  f.interrupted = true;
  EXPECT_EQ(decide_outcome(f).reason, "interrupted");
}

TEST(Outcome, MilaLines) {
  EXPECT_EQ(summary_line(1, 19, 0, 1, 0.27 * 60, "loader"), "[ 1/19][  /  ] PASSED |     0.27 MIN | loader");
  EXPECT_EQ(summary_line(2, 19, 1, 2, 0.93 * 60, "vae"), "[ 2/19][ 1/ 2] FAILED |     0.93 MIN | vae");
  EXPECT_EQ(total_line(2817.82), "Total Time  2817.82 s");
  EXPECT_EQ(status_line(2, 19, "loader", 2, 0, 0, 12.3, 270),
            "[ 2/19] loader | 2 running, 0 passed, 0 failed | 12.3 s | ETA 4.50 min");
}

// $CPU_COUNT, $JOB_ID, $DEVICE_TOTAL, ... in a job's args expand from each
// instance's own values (not from mlbench-run's environment, where they may be unset
// or mean something else), as each instance of the Mila suite sources its own config.
TEST(Plan, VariablesExpandPerInstance) {
  auto jobs = parse_jobs(R"([{"name": "v", "cmd": "v", "args": {
      "--cpu-cores": "$CPU_COUNT", "--job": "${JOB_ID}", "--devices": "$DEVICE_TOTAL",
      "--report": "$OUTPUT_DIRECTORY/$BENCH_NAME", "--data": "$DATA_DIRECTORY/x",
      "--mem": "$RAM_CONSTRAINT/$RAM_TOTAL", "--cpus": "$CPU_TOTAL", "--home": "$BASE", "-b": [1, 2]}},
    {"name": "w", "cmd": "w", "args": {"--cpu-cores": "$CPU_COUNT", "--job": "$JOB_ID"}, "cgroup": "all"}])",
                         "x.json");
  PlanSettings s;
  s.suite = "fast";
  s.output_directory = "/o";
  s.data_directory = "/d";
  s.all_cpus = {0, 1, 2, 3, 4, 5};
  s.ram_total = 6 * 1024 * 1024;  // 6 MiB = 6144 kB
  // The runner's own environment says otherwise: the instance's values win.
  const std::map<std::string, std::string> env = {{"CPU_COUNT", "99"}, {"JOB_ID", "7"}, {"BASE", "/b"}};
  auto plan = make_plan(jobs, {"/bin/v", "/bin/w"}, make_slots(s.all_cpus, s.ram_total, 3, std::nullopt), s, env,
                        "x.json");
  ASSERT_EQ(plan.size(), 3u);
  ASSERT_EQ(plan[1].instances.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const Instance& inst = plan[1].instances[static_cast<std::size_t>(i)];
    EXPECT_EQ(inst.argv, (std::vector<std::string>{"--cpu-cores", "2", "--job", std::to_string(i), "--devices", "3",
                                                   "--report", "/o/v", "--data", "/d/x", "--mem", "2048/6144", "--cpus",
                                                   "6", "--home", "/b", "-b", "2", "--seed",
                                                   std::to_string((i + 1) * 100)}))
        << i;
    EXPECT_EQ(inst.env.at("DEVICE_TOTAL"), "3");
    EXPECT_EQ(inst.env.at("CPU_TOTAL"), "6");
    EXPECT_EQ(inst.env.at("RAM_TOTAL"), "6144");
    EXPECT_EQ(inst.env.at("CPU_COUNT"), "2");
  }
  EXPECT_EQ(plan[1].title, "v [-b 2]");
  const Instance& w = plan[2].instances.at(0);  // `all`: the whole machine, JOB_ID 0
  EXPECT_EQ(w.argv, (std::vector<std::string>{"--cpu-cores", "6", "--job", "0", "--seed", "3"}));
  EXPECT_EQ(w.env.at("RAM_CONSTRAINT"), "6144");
  // With GPUs DEVICE_TOTAL is the GPU count.
  s.gpus = 4;
  auto gpu_plan = make_plan(jobs, {"/bin/v", "/bin/w"}, make_slots(s.all_cpus, s.ram_total, 2, std::nullopt), s, env,
                            "x.json");
  EXPECT_EQ(gpu_plan[0].instances[1].argv[5], "4");
  EXPECT_EQ(gpu_plan[0].instances[1].env.at("CUDA_VISIBLE_DEVICES"), "1");
}

TEST(Plan, UnknownVariableNamesJobAndVariable) {
  auto jobs = parse_jobs(R"([{"name": "ok", "cmd": "a", "args": {"--c": "$CPU_COUNT"}},
                             {"name": "bad", "cmd": "b", "args": {"--x": "$DEVICE_TOTALS"}}])",
                         "x.json");
  PlanSettings s;
  s.all_cpus = {0, 1};
  try {
    make_plan(jobs, {"/bin/a", "/bin/b"}, make_slots({0, 1}, 1000, 2, std::nullopt), s, {}, "x.json");
    ADD_FAILURE() << "expected a JobsError";
  } catch (const JobsError& e) {
    EXPECT_STREQ(e.what(), "x.json: job 1 (bad): field 'args.--x': $DEVICE_TOTALS is not set");
  }
}
