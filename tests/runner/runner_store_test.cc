// mlbench-run and the results store (docs/report.md, "The results store"): the real
// runner with fakebench records each instance as its report lands, the run's end, a
// Ctrl-C's finished instances, and --resume in the same run; a store it cannot use
// (not a database, a newer schema, a full disk) is one line, a non-zero exit, and the
// reports on disk.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/process.h"
#include "store/results_store.h"
#include "tests/runner/runner_test_fixture.h"
#include "tests/store/postgres_server.h"
#include "tests/support/processes.h"
#include "tests/support/run_command.h"

namespace fs = std::filesystem;
using mlbench::testing_support::run_command;
using nlohmann::json;
using Result = mlbench::testing_support::CommandResult;
using mlbench::store::ResultsStore;

namespace {

class RunnerStore : public mlbench::testing_support::RunnerTest {
 protected:
  RunnerStore() : RunnerTest("store") {}
  void TearDown() override {
    if (mounted_) run_command("umount -l " + (dir_ / "disk").string());
    RunnerTest::TearDown();
  }
  std::unique_ptr<ResultsStore> open_store() { return ResultsStore::open((dir_ / "out" / "results.db").string()); }
  // The lines of `output` that name the results store.
  static int store_lines(const std::string& output) {
    int n = 0;
    for (std::size_t at = output.find("results store"); at != std::string::npos;
         at = output.find("results store", at + 1)) {
      ++n;
    }
    return n;
  }
  bool mounted_ = false;
};

std::string machine_run_id(const fs::path& dir) {
  return json::parse(std::ifstream(dir / "machine.json"))["run_id"].get<std::string>();
}

}  // namespace

TEST_F(RunnerStore, EachInstanceIsRecordedWithItsRunAndMachine) {
  const std::string j = jobs(R"([{"name": "a", "cmd": "FAKE", "args": {}, "cgroup": "student"},
                                 {"name": "b", "cmd": "FAKE", "args": {"--exit-code": 3}, "cgroup": "student"}])");
  const Result r = runner("--jobs " + j + " --slots 2 --no-cgroup --repeat-suite 2");
  ASSERT_EQ(r.exit_code, 1) << r.output;  // b fails
  EXPECT_EQ(store_lines(r.output), 0) << r.output;
  const std::string run_id = machine_run_id(dir_ / "out" / "R0");
  EXPECT_EQ(machine_run_id(dir_ / "out" / "R1"), run_id);
  auto s = open_store();
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_id, run_id);
  EXPECT_EQ(runs[0].status, "finished");
  EXPECT_EQ(runs[0].suite, "jobs");
  EXPECT_FALSE(runs[0].finished_at.empty());
  EXPECT_NE(runs[0].command.find("--repeat-suite 2"), std::string::npos) << runs[0].command;
  ASSERT_EQ(s->machines().size(), 1u);
  EXPECT_EQ(runs[0].machine, s->machines()[0].fingerprint);
  const auto a = s->instances({.bench = "a", .with_report = true});
  ASSERT_EQ(a.size(), 4u);  // 2 passes x 2 slots
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (const auto& h : a) {
    EXPECT_FALSE(h.instance.failed) << h.instance.reason;
    EXPECT_GT(h.instance.items_per_s.value_or(0), 0);
    EXPECT_EQ(h.instance.report["runner"]["run_id"], run_id);
    EXPECT_TRUE(fs::exists(dir_ / "out" / h.instance.file)) << h.instance.file;
    seen.insert({h.instance.pass, h.instance.slot});
  }
  EXPECT_EQ(seen.size(), 4u);
  const auto b = s->instances({.bench = "b"});
  ASSERT_EQ(b.size(), 4u);
  for (const auto& h : b) {
    EXPECT_TRUE(h.instance.failed);
    EXPECT_EQ(h.instance.reason, "exit 3");
  }
}

TEST_F(RunnerStore, ResumeContinuesTheSameRunAndTheRerunReplacesTheFailRecord) {
  const fs::path flag = dir_ / "fail-now";
  std::ofstream(flag) << "x";
  const std::string j = jobs(R"([{"name": "good", "cmd": "FAKE", "args": {}, "cgroup": "all"},
    {"name": "flaky", "cmd": "FAKE", "args": {"--fail-if-exists": ")" +
                             flag.string() + R"("}, "cgroup": "all"}])");
  Result r = runner("--jobs " + j + " --no-cgroup");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  fs::remove(flag);
  r = run_command(std::string(MLBENCH_RUN) + " --jobs " + j + " --no-cgroup --resume " + (dir_ / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto s = open_store();
  ASSERT_EQ(s->runs().size(), 1u);
  EXPECT_EQ(s->runs()[0].status, "finished");
  const auto flaky = s->instances({.bench = "flaky"});
  ASSERT_EQ(flaky.size(), 1u);
  EXPECT_FALSE(flaky[0].instance.failed) << flaky[0].instance.reason;
  EXPECT_EQ(s->instances({.bench = "good"}).size(), 1u);
}

TEST_F(RunnerStore, CtrlCKeepsEveryInstanceThatFinishedAndMarksTheRunInterrupted) {
  const std::string j = jobs(R"([{"name": "quick", "cmd": "FAKE", "args": {}, "cgroup": "student"},
                                 {"name": "long", "cmd": "FAKE", "args": {"--hang": ""}, "cgroup": "student"}])");
  mlbench::core::ProcessSpec spec;
  spec.executable = MLBENCH_RUN;
  spec.args = {"--jobs", j, "--outdir", (dir_ / "out").string(), "--slots", "2", "--no-cgroup"};
  spec.output = mlbench::core::Output::File;
  spec.log_path = (dir_ / "runner.txt").string();
  mlbench::core::Process runner_process(spec);
  const pid_t pid = runner_process.pid();
  // The second step's instances run once the first step's reports have landed.
  std::set<int> kids;
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kids = mlbench::testing_support::children_of(pid);
    if (kids.size() == 2 && fs::exists(dir_ / "out" / "results.db")) {
      auto s = open_store();
      if (s->instances({.bench = "quick"}).size() == 2) break;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGINT);
  const auto status = runner_process.wait();
  std::ifstream txt(dir_ / "runner.txt");
  const std::string output((std::istreambuf_iterator<char>(txt)), {});
  EXPECT_EQ(status.code, 130) << output;
  auto s = open_store();
  const auto quick = s->instances({.bench = "quick"});
  ASSERT_EQ(quick.size(), 2u) << output;
  for (const auto& h : quick) EXPECT_FALSE(h.instance.failed);
  const auto long_ones = s->instances({.bench = "long"});
  ASSERT_EQ(long_ones.size(), 2u) << output;
  for (const auto& h : long_ones) EXPECT_EQ(h.instance.reason, "interrupted");
  EXPECT_EQ(s->runs().at(0).status, "interrupted");
}

// Faults: the store cannot be used; the run goes on, its reports are on disk, the exit says so.
TEST_F(RunnerStore, AStoreThatIsNotADatabaseIsOneLineAndTheReportsStayOnDisk) {
  const fs::path bad = dir_ / "notes.db";
  std::ofstream(bad) << "not a database\n" << std::string(8192, 'x');
  const std::string j = jobs(R"([{"name": "a", "cmd": "FAKE", "args": {}, "cgroup": "all"}])");
  const Result r = runner("--jobs " + j + " --no-cgroup --store " + bad.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("mlbench-run: error: results store " + bad.string() + ": file is not a database"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(store_lines(r.output), 1) << "one line\n" << r.output;
  ASSERT_EQ(reports("a").size(), 1u);
  EXPECT_EQ(reports("a")[0]["completed"], true);
  EXPECT_NE(r.output.find("PASSED"), std::string::npos) << r.output;
}

TEST_F(RunnerStore, AStoreOfANewerSchemaIsRefusedInOneLineAndTheRunGoesOn) {
  fs::create_directories(dir_ / "out");
  {
    auto s = open_store();
    s->database().exec("INSERT INTO mlbench_schema (version) VALUES (7)");
  }
  const std::string j = jobs(R"([{"name": "a", "cmd": "FAKE", "args": {}, "cgroup": "all"}])");
  const Result r = runner("--jobs " + j + " --no-cgroup");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("its schema is version 7, newer than this mlbench's"), std::string::npos) << r.output;
  ASSERT_EQ(reports("a").size(), 1u);
  EXPECT_EQ(reports("a")[0]["completed"], true);
}

TEST_F(RunnerStore, AFullDiskUnderTheStoreIsOneLineAndTheReportsStayOnDisk) {
  fs::create_directories(dir_ / "disk");
  const Result m = run_command("mount -t tmpfs -o size=1m tmpfs " + (dir_ / "disk").string());
  if (m.exit_code != 0) GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << m.output;
  mounted_ = true;
  const std::string disk = (dir_ / "disk").string();
  // The first instance fills the store's file system after its report (on another disk) is written.
  const std::string j = jobs(R"([{"name": "a", "cmd": "FAKE", "args": {"--fill-dir": ")" + disk +
                             R"("}, "cgroup": "all"}, {"name": "b", "cmd": "FAKE", "args": {}, "cgroup": "all"}])");
  const Result r = runner("--jobs " + j + " --no-cgroup --store " + disk + "/results.db");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("results store " + disk + "/results.db: database or disk is full"), std::string::npos)
      << r.output;
  EXPECT_LE(store_lines(r.output), 4) << r.output;
  EXPECT_EQ(reports("a").at(0)["completed"], true);
  EXPECT_EQ(reports("b").at(0)["completed"], true);
}

// The default store on a nearly full disk: the run folder's own files come first. SQLite's -wal
// and -shm took the last 100 KB, so machine.json could not be written: exit 2 and nothing ran
// (at 20-28 KB free the one message was "disk I/O error"). Now the store is given up in one line
// naming it and the cause; machine.json, the report and the summary are written.
TEST_F(RunnerStore, TheDefaultStoreOnANearlyFullDiskGivesWayToTheRunsFiles) {
  for (const std::string size : {"100k", "28k"}) {
    SCOPED_TRACE(size);
    const fs::path out = dir_ / "out";
    fs::create_directories(out);
    const Result m = run_command("mount -t tmpfs -o size=" + size + " tmpfs " + out.string());
    if (m.exit_code != 0) GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << m.output;
    struct Unmount {
      fs::path at;
      ~Unmount() { run_command("umount -l " + at.string()); }
    } unmount{out};
    const std::string j = jobs(R"([{"name": "a", "cmd": "FAKE", "args": {}, "cgroup": "all"}])");
    const Result r = runner("--jobs " + j + " --no-cgroup");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(fs::exists(out / "machine.json")) << r.output;
    ASSERT_EQ(reports("a").size(), 1u) << r.output;
    EXPECT_EQ(reports("a")[0]["completed"], true) << r.output;
    EXPECT_NE(r.output.find("mlbench-run: error: results store " + (out / "results.db").string() + ": not used: only "),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("free on " + out.string()), std::string::npos) << r.output;
    EXPECT_EQ(store_lines(r.output), 1) << "one line\n" << r.output;
    EXPECT_EQ(r.output.find("disk I/O error"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("PASSED"), std::string::npos) << r.output;
  }
}

// The issue's "done when" on a small scale: the same suite run twice into one output folder (2
// passes each), the second time with fewer loader workers; mlbench-report --history on the
// store the runs wrote shows both runs, flags the regression with its size and says the time
// moved into prep. stallsim's prep sleeps on --cpu-cores virtual CPUs, so the slowdown is the
// same on a loaded machine.
TEST_F(RunnerStore, TwoRunsWithFewerWorkersShowTheRegressionMovedIntoPrep) {
  const fs::path data = dir_ / "data" / "class0";
  fs::create_directories(data);
  for (int i = 0; i < 64; ++i) std::ofstream(data / ("f" + std::to_string(i) + ".bin")) << std::string(2048, 'x');
  auto suite = [&](int workers) {
    const std::string j = jobs(R"([{"name": "loader", "cmd": ")" + std::string(STALLSIM) +
                               R"(", "args": {"--data": ")" + (dir_ / "data").string() + R"(", "--workers": )" +
                               std::to_string(workers) + R"(, "--cpu-cores": )" + std::to_string(workers) +
                               R"(, "--prep-ms": 4, "--compute-ms": 1, "--batch-size": 8, "--number": 4,
                               "--repeat": 6}, "cgroup": "all"}])");
    return runner("--jobs " + j + " --no-cgroup --repeat-suite 2 --suite fast");
  };
  Result r = suite(4);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = suite(1);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Result h = run_command(std::string(MLBENCH_REPORT) + " --store " + (dir_ / "out" / "results.db").string() +
                               " --history loader");
  ASSERT_EQ(h.exit_code, 0) << h.output;
  EXPECT_NE(h.output.find("2 runs"), std::string::npos) << h.output;
  EXPECT_NE(h.output.find("regression -"), std::string::npos) << h.output;
  EXPECT_NE(h.output.find("(by size; 2 v 2 passes, the test needs 4 a side)"), std::string::npos) << h.output;
  EXPECT_NE(h.output.find("its time moved into prep"), std::string::npos) << h.output;
}

// A PostgreSQL password never reaches a file or a table: the run's command line (its --store URL
// with the password in the user part and in the query, and a job's keyword/value conninfo)
// is masked before it is written. The runs table kept the whole command line in the clear.
namespace {

class RunnerPostgresStore : public mlbench::testing_support::PostgresTest {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (IsSkipped()) return;
    tmp_ = mlbench::testing_support::temp_dir_for_current_test("pgstore");
    dir_ = tmp_->path();
  }
  void TearDown() override {
    if (HasFailure() && tmp_) tmp_->keep();
  }
  std::unique_ptr<mlbench::testing_support::TempDir> tmp_;
  fs::path dir_;
};

}  // namespace

TEST_F(RunnerPostgresStore, NoFileOrTableTheRunWritesHoldsThePassword) {
  const std::string password = server_->password();
  ASSERT_GE(password.size(), 8u);
  const std::string url = url_ + "&password=" + password;
  const fs::path script = dir_ / "leaky.sh";
  std::ofstream(script) << "#!/bin/sh\necho \"args: $#\"\nexit 0\n";
  fs::permissions(script, fs::perms::owner_all);
  std::ofstream(dir_ / "jobs.json") << R"([{"name": "a", "cmd": ")" << FAKEBENCH << R"(", "args": {}, "cgroup": "all"},
    {"name": "leaky", "cmd": ")" << script.string()
                                    << R"(", "args": {"--conninfo": "host=/run/pg user=mlbench password=)" << password
                                    << R"( dbname=x"}, "cgroup": "all"}])";
  const Result r = run_command(std::string(MLBENCH_RUN) + " --outdir " + (dir_ / "out").string() + " --jobs " +
                               (dir_ / "jobs.json").string() + " --no-cgroup --store '" + url + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // leaky writes no report
  EXPECT_EQ(r.output.find(password), std::string::npos) << r.output;
  // Every file the run wrote.
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "out")) {
    if (!e.is_regular_file()) continue;
    ++files;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(text.find(password), std::string::npos) << e.path() << ":\n" << text;
  }
  EXPECT_GE(files, 5) << "machine.json, summary.txt, two reports, two logs";
  // Every table of the store, every value.
  auto s = ResultsStore::open(url_);
  int values = 0;
  for (const auto& table :
       s->database().query("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")) {
    for (const auto& row : s->database().query("SELECT * FROM " + *table.at(0))) {
      for (const auto& v : row) {
        ++values;
        if (v) {
          EXPECT_EQ(v->find(password), std::string::npos) << *table.at(0) << ": " << *v;
        }
      }
    }
  }
  EXPECT_GT(values, 0);
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);
  // The URL's other parts stay.
  EXPECT_NE(runs[0].command.find("postgresql://mlbench:***@/"), std::string::npos) << runs[0].command;
  EXPECT_NE(runs[0].command.find("&password=***"), std::string::npos) << runs[0].command;
  EXPECT_EQ(s->instances({.bench = "a"}).size(), 1u);
  const auto leaky = s->instances({.bench = "leaky", .with_report = true});
  ASSERT_EQ(leaky.size(), 1u);
  EXPECT_NE(leaky[0].instance.report["runner"]["command"].get<std::string>().find("password=***"), std::string::npos)
      << leaky[0].instance.report.dump();
}
