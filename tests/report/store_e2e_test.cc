// The real mlbench-report on a results store (SQLite in a temporary folder): --import twice
// gives the same counts, --history and --machines on imported run folders of two machines,
// CPU targets of another CPU refused with the line naming what exists, and bad input (a file
// that is not a database, a view of an empty store, a folder that is not a run): one line
// "mlbench-report: error: ..." and exit 1.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report_tree_writer.h"

namespace mlbench::report::testing {
namespace {
namespace fs = std::filesystem;

const std::string kBin = MLBENCH_REPORT_BIN;

nlohmann::json machine_block(const std::string& host, const std::string& cpu, int cores) {
  return {{"hostname", host},        {"cpu_model", cpu},          {"logical_cores", cores},
          {"physical_cores", cores}, {"memory_bytes", 8LL << 30}, {"gpus", nlohmann::json::array()},
          {"kernel", "6.1"},         {"cgroup_mode", "v2"}};
}

// A tree of `passes` R<k> folders with loader and toy_reg on one machine, its run id in machine.json.
void write_run(const fs::path& root, const std::string& host, const std::string& cpu, int passes, double loader,
               const std::string& started, const std::string& run_id) {
  for (int k = 0; k < passes; ++k) {
    for (const std::string name : {"loader", "toy_reg"}) {
      FakeInstance i;
      i.name = name;
      i.run = k;
      i.items_per_s = name == "loader" ? loader + k : 5000.0;
      i.extra = {{"machine", machine_block(host, cpu, 2)}, {"start_time", started}, {"end_time", started}};
      write_fake_report(root, i);
    }
    nlohmann::json m = machine_block(host, cpu, 2);
    m["run_id"] = run_id;
    m["run"] = {{"started", started}, {"suite", "fast"}};
    std::ofstream(root / ("R" + std::to_string(k)) / "machine.json") << m.dump();
  }
}

CommandResult report(const std::string& args) {
  return run_command(kBin + " " + args + " --color never");
}

TEST(StoreE2E, ImportTwiceGivesTheSameCountsAndTheHistoryShowsTheRegression) {
  TempDir tmp;
  write_run(tmp.path() / "before", "alpha", "AMD EPYC", 2, 1000, "2026-01-01T00:00:00Z", "20260101-000000-1");
  write_run(tmp.path() / "after", "alpha", "AMD EPYC", 2, 700, "2026-01-02T00:00:00Z", "20260102-000000-2");
  const std::string store = (tmp.path() / "results.db").string();
  const std::string import = "--store " + store + " --import " + (tmp.path() / "before").string() + " --import " +
                             (tmp.path() / "after").string();
  const CommandResult first = report(import);
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("imported 8 instance reports of 2 runs, 0 already there, 0 stall analyses"),
            std::string::npos)
      << first.output;
  const CommandResult again = report(import);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("imported 0 instance reports of 2 runs, 8 already there, 0 stall analyses"),
            std::string::npos)
      << again.output;

  const fs::path csv = tmp.path() / "h.csv", json = tmp.path() / "h.json";
  const CommandResult h =
      report("--store " + store + " --history loader --csv " + csv.string() + " --json " + json.string());
  ASSERT_EQ(h.status, 0) << h.output;
  EXPECT_NE(h.output.find("loader on CPU: AMD EPYC x2 / alpha: 2 runs"), std::string::npos) << h.output;
  EXPECT_NE(h.output.find("20260102-000000-2"), std::string::npos) << h.output;
  EXPECT_NE(h.output.find("regression -30.0% (by size; 2 v 2 passes, the test needs 4 a side)"), std::string::npos)
      << h.output;
  EXPECT_EQ(h.output.find("toy_reg on"), std::string::npos) << "--history loader shows only loader:\n" << h.output;
  EXPECT_NE(read_text(csv).find(",regression,"), std::string::npos) << read_text(csv);
  const nlohmann::json j = nlohmann::json::parse(read_text(json));
  ASSERT_EQ(j["history"]["series"].size(), 1u);
  EXPECT_EQ(j["history"]["series"][0]["runs"][1]["change"]["verdict"], "regression");
  EXPECT_EQ(j["history"]["series"][0]["runs"][1]["pass_values"].size(), 2u);
}

TEST(StoreE2E, MachinesSideBySide) {
  TempDir tmp;
  write_run(tmp.path() / "a", "alpha", "AMD EPYC", 1, 1000, "2026-01-01T00:00:00Z", "run-a");
  write_run(tmp.path() / "b", "beta", "Intel Xeon", 1, 250, "2026-01-01T00:00:00Z", "run-b");
  const std::string store = (tmp.path() / "results.db").string();
  const CommandResult r = report("--store " + store + " --import " + (tmp.path() / "a").string() + " --import " +
                                 (tmp.path() / "b").string() + " --machines");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("CPU: AMD EPYC x2 / alpha"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CPU: Intel Xeon x2 / beta"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1000 (x1.00) 10.0%"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("250 (x0.25) 10.0%"), std::string::npos) << r.output;
  // --write-targets needs one kind: two are named.
  const CommandResult t = report("--store " + store + " --write-targets " + (tmp.path() / "t.json").string());
  EXPECT_EQ(t.status, 1) << t.output;
  EXPECT_NE(t.output.find("holds runs of 2 machine kinds (CPU: AMD EPYC x2, CPU: Intel Xeon x2); name one with "
                          "--machine-kind"),
            std::string::npos)
      << t.output;
  const CommandResult ok = report("--store " + store + " --write-targets " + (tmp.path() / "t.json").string() +
                                  " --machine-kind 'Intel Xeon x2' --min-runs 1");
  ASSERT_EQ(ok.status, 0) << ok.output;
  const nlohmann::json j = nlohmann::json::parse(read_text(tmp.path() / "t.json"));
  EXPECT_EQ(j["model"], "CPU");
  EXPECT_EQ(j["cpu_model"], "Intel Xeon");
  EXPECT_EQ(j["logical_cores"], 2);
  EXPECT_EQ(j["benchmarks"]["loader"], 250);
}

TEST(StoreE2E, TargetsOfAnotherCpuAreRefusedWithTheLine) {
  TempDir tmp;
  write_run(tmp.path() / "runs", "alpha", "AMD EPYC", 1, 1000, "2026-01-01T00:00:00Z", "run-a");
  const fs::path targets = tmp.path() / "cpu.json";
  std::ofstream(targets) << R"({"model": "CPU", "cpu_model": "AMD EPYC 7B13", "logical_cores": 8,
                                "benchmarks": {"loader": 900, "toy_reg": 5000}})";
  const CommandResult r = report("--reports " + (tmp.path() / "runs").string() + " --targets " + targets.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("no target for this CPU (AMD EPYC x2); targets exist for: AMD EPYC 7B13 x8 (cpu.json)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("    900.0"), std::string::npos) << "compared with another CPU's target:\n" << r.output;
  // The same CPU: compared.
  std::ofstream(targets) << R"({"model": "CPU", "cpu_model": "amd  epyc", "logical_cores": 2,
                                "benchmarks": {"loader": 900, "toy_reg": 5000}})";
  const CommandResult same = report("--reports " + (tmp.path() / "runs").string() + " --targets " + targets.string());
  ASSERT_EQ(same.status, 0) << same.output;
  EXPECT_EQ(same.output.find("no target for this CPU"), std::string::npos) << same.output;
  EXPECT_NE(same.output.find("900.0"), std::string::npos) << same.output;
  // A file made before the fields: read, and said to be of an unknown kind.
  std::ofstream(targets) << R"({"model": "CPU", "benchmarks": {"loader": 900, "toy_reg": 5000}})";
  const CommandResult old = report("--reports " + (tmp.path() / "runs").string() + " --targets " + targets.string());
  ASSERT_EQ(old.status, 0) << old.output;
  EXPECT_NE(old.output.find("names no CPU (made before targets named their cpu_model and logical_cores)"),
            std::string::npos)
      << old.output;
}

// One line naming the problem, exit 1 (docs/reliability.md).
void expect_one_error_line(const CommandResult& r, const std::string& part) {
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output.rfind("mlbench-report: error: ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find(part), std::string::npos) << r.output;
}

TEST(StoreE2E, AFileThatIsNotADatabaseIsOneLine) {
  TempDir tmp;
  const fs::path bad = tmp.path() / "results.db";
  std::ofstream(bad) << std::string(4096, 'x');
  expect_one_error_line(report("--store " + bad.string() + " --history"), bad.string());
  EXPECT_EQ(read_text(bad), std::string(4096, 'x')) << "the file was changed";
}

TEST(StoreE2E, HistoryOfAnEmptyStoreIsOneLine) {
  TempDir tmp;
  const std::string store = (tmp.path() / "results.db").string();
  expect_one_error_line(report("--store " + store + " --history"), "holds no run");
  expect_one_error_line(report("--store " + store + " --machines"), "holds no run");
}

TEST(StoreE2E, ImportOfAFolderThatIsNotARunIsOneLine) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "photos");
  std::ofstream(tmp.path() / "photos" / "notes.txt") << "not a run";
  const std::string store = (tmp.path() / "results.db").string();
  expect_one_error_line(report("--store " + store + " --import " + (tmp.path() / "photos").string()),
                        "not a run folder");
  expect_one_error_line(report("--store " + store + " --import " + (tmp.path() / "missing").string()),
                        "no such file or directory");
}

// A report that does not validate (a field of the wrong type) is imported as a failed instance
// with the reader's reason and one warning naming it; the others are imported; the exit is 1.
// (It was skipped, and a folder of only such reports was "not a run folder".)
TEST(StoreE2E, AReportThatDoesNotValidateIsAFailedInstanceAWarningAndExit1) {
  TempDir tmp;
  write_run(tmp.path() / "run", "alpha", "AMD EPYC", 1, 1000, "2026-01-01T00:00:00Z", "20260101-000000-1");
  fs::path bad;
  for (const auto& e : fs::directory_iterator(tmp.path() / "run" / "R0")) {
    if (e.path().filename().string().find(".toy_reg.") != std::string::npos) bad = e.path();
  }
  ASSERT_FALSE(bad.empty());
  nlohmann::json j = nlohmann::json::parse(read_text(bad));
  j["train_item"] = "fast";
  std::ofstream(bad) << j.dump();
  const std::string store = (tmp.path() / "results.db").string();
  const CommandResult r = report("--store " + store + " --import " + (tmp.path() / "run").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("warning: " + bad.string() +
                          ": train_item is \"fast\" (not an object); imported as a failed "
                          "instance"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("imported 2 instance reports of 1 run,"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 imported report(s) cannot be read or do not validate"), std::string::npos) << r.output;
  const CommandResult h = report("--store " + store + " --history toy_reg");
  EXPECT_NE(h.output.find("train_item is \"fast\""), std::string::npos) << h.output;
}

// A report that cannot be read (truncated, empty, valid JSON that is no report object) is
// imported as a failed instance of the benchmark its file name says, with the reason, one
// warning naming the file, and exit 1, as a report that does not validate. (They were
// dropped: "imported 5 instance reports", exit 0, and --history showed clean passes.)
TEST(StoreE2E, AnUnreadableReportIsAFailedInstanceAWarningAndExit1) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  write_run(run, "alpha", "AMD EPYC", 4, 1000, "2026-01-01T00:00:00Z", "20260101-000000-1");
  auto loader_report = [&](int pass) {
    for (const auto& e : fs::directory_iterator(run / ("R" + std::to_string(pass)))) {
      if (e.path().filename().string().find(".loader.") != std::string::npos) return e.path();
    }
    return fs::path();
  };
  const fs::path truncated = loader_report(1), empty = loader_report(2), array = loader_report(3);
  ASSERT_FALSE(truncated.empty() || empty.empty() || array.empty());
  const std::string text = read_text(truncated);
  std::ofstream(truncated, std::ios::trunc) << text.substr(0, text.size() / 2);
  std::ofstream(empty, std::ios::trunc).close();
  std::ofstream(array, std::ios::trunc) << "[1,2,3]";
  const std::string store = (tmp.path() / "results.db").string();
  const CommandResult r = report("--store " + store + " --import " + run.string());
  EXPECT_EQ(r.status, 1) << r.output;
  for (const auto& [file, why] :
       {std::pair{truncated, "not valid JSON"}, {empty, "not valid JSON"}, {array, "not a report object"}}) {
    EXPECT_NE(r.output.find("warning: " + file.string() + ": " + why + "; imported as a failed instance"),
              std::string::npos)
        << r.output;
  }
  EXPECT_NE(r.output.find("imported 8 instance reports of 1 run,"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("3 imported report(s) cannot be read or do not validate"), std::string::npos) << r.output;
  const CommandResult h = report("--store " + store + " --history loader --json " + (tmp.path() / "h.json").string());
  EXPECT_EQ(h.status, 0) << h.output;
  EXPECT_NE(h.output.find("unreadable report (not valid JSON)"), std::string::npos) << h.output;
  EXPECT_NE(h.output.find("unreadable report (not a report object)"), std::string::npos) << h.output;
  // Imported again: nothing new, the same warnings and exit (the files are still unreadable).
  const CommandResult again = report("--store " + store + " --import " + run.string());
  EXPECT_EQ(again.status, 1) << again.output;
  EXPECT_NE(again.output.find("imported 0 instance reports of 1 run, 8 already there"), std::string::npos)
      << again.output;
}

// A store on a read-only mount is read (--history, --machines, --write-targets open it read-only;
// SQLite's immutable mode where its folder cannot be written). It failed with "unable to open
// database file": a WAL store needs its -shm file, which a read-only folder cannot hold.
TEST(StoreE2E, AStoreOnAReadOnlyMountIsRead) {
  TempDir tmp;
  write_run(tmp.path() / "run", "alpha", "AMD EPYC", 2, 1000, "2026-01-01T00:00:00Z", "20260101-000000-1");
  const fs::path rw = tmp.path() / "rw", ro = tmp.path() / "ro";
  fs::create_directories(rw);
  fs::create_directories(ro);
  const std::string written = (rw / "results.db").string();
  ASSERT_EQ(report("--store " + written + " --import " + (tmp.path() / "run").string()).status, 0);
  const CommandResult m = run_command("mount --bind " + rw.string() + " " + ro.string() +
                                      " && mount -o remount,ro,bind " + ro.string() + " 2>&1");
  if (m.status != 0) {
    run_command("umount " + ro.string() + " 2>/dev/null");
    GTEST_SKIP() << "cannot make a read-only bind mount (needs root): " << m.output;
  }
  struct Unmount {
    fs::path at;
    ~Unmount() { run_command("umount -l " + at.string()); }
  } unmount{ro};
  const std::string store = (ro / "results.db").string();
  ASSERT_NE(run_command("touch " + (ro / "probe").string()).status, 0) << "the mount is read-only";
  const CommandResult h = report("--store " + store + " --history loader");
  EXPECT_EQ(h.status, 0) << h.output;
  EXPECT_NE(h.output.find("loader on CPU: AMD EPYC x2 / alpha: 1 run"), std::string::npos) << h.output;
  const CommandResult machines = report("--store " + store + " --machines");
  EXPECT_EQ(machines.status, 0) << machines.output;
  // A write is refused in one line naming the store.
  const CommandResult import = report("--store " + store + " --import " + (tmp.path() / "run").string());
  EXPECT_EQ(import.status, 1) << import.output;
  EXPECT_NE(import.output.find("mlbench-report: error: results store " + store + ": "), std::string::npos)
      << import.output;
}

}  // namespace
}  // namespace mlbench::report::testing
