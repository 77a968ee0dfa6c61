// mlbench-stall's bad input, end to end: an unknown benchmark, a dataset that
// does not exist and a benchmark that fails in one of the runs each give one
// clear line and the documented exit status, and the runs finished before a
// failure stay in --out.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "stall/page_cache.h"
#include "store/results_store.h"
#include "tests/support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mlbench::testing_support::run_command;
using mlbench::testing_support::scratch_dir;

// The message line mlbench-stall printed, the one naming the error.
std::string error_line(const std::string& output) {
  const auto at = output.find("mlbench-stall: error:");
  if (at == std::string::npos) return "";
  return output.substr(at, output.find('\n', at) - at);
}

class StallCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("stall_cli");
    for (int c = 0; c < 2; ++c) {
      fs::create_directories(dir_ / "data" / fmt::format("c{}", c));
      for (int i = 0; i < 8; ++i) {
        std::ofstream(dir_ / "data" / fmt::format("c{}", c) / fmt::format("f{}.bin", i)) << std::string(4096, 'x');
      }
    }
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string stall(const std::string& args) const {
    return fmt::format("{} --data {} --out {} {}", MLBENCH_STALL_BIN, (dir_ / "data").string(), (dir_ / "out").string(),
                       args);
  }
  // mlbench-stall on stallsim: one CPU in the sweep, a 50% cache point, `stall_flags` more, then
  // stallsim's flags.
  std::string stallsim(const std::string& stall_flags, const std::string& bench_flags) const {
    return stall(fmt::format("--bench stallsim --bench-dir {} --cpus 1 --cache-fracs 0.5 {} -- {}", MLBENCH_BENCH_DIR,
                             stall_flags, bench_flags));
  }
  nlohmann::json stall_json() const {
    std::ifstream in(dir_ / "out" / "stall.json");
    return in.good() ? nlohmann::json::parse(in) : nlohmann::json();
  }
  fs::path dir_;
};

TEST_F(StallCli, UnknownBenchmarkIsOneLineAndExit2) {
  const auto r = run_command(stall("--bench no_such_bench"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(error_line(r.output).find("unknown benchmark 'no_such_bench'"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "out" / "runs.json"));
}

TEST_F(StallCli, MissingDatasetIsOneLineAndExit2) {
  const auto r = run_command(fmt::format("{} --bench stallsim --bench-dir {} --data {} --out {}", MLBENCH_STALL_BIN,
                                         MLBENCH_BENCH_DIR, (dir_ / "nope").string(), (dir_ / "out").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(error_line(r.output).find("does not exist"), std::string::npos) << r.output;
}

TEST_F(StallCli, AFailingRunNamesItselfAndKeepsTheRunsDone) {
  // A benchmark that works until the fetch-only runs, then crashes.
  const fs::path bin = dir_ / "bin";
  fs::create_directories(bin);
  {
    std::ofstream script(bin / "flaky");
    script << "#!/bin/sh\ncase \" $* \" in *\" --fetch-only \"*) echo 'flaky: crashing on purpose' >&2; exit 3;; esac\n"
           << "exec " << MLBENCH_BENCH_DIR << "/stallsim \"$@\"\n";
  }
  fs::permissions(bin / "flaky", fs::perms::owner_all, fs::perm_options::add);
  const auto r = run_command(stall(fmt::format("--bench flaky --bench-dir {} --cpus 1 --cache-fracs 0.5 --iterations 4 "
                                               "-- --batch-size 2 --workers 1 --compute-ms 0.1 --prep-ms 0.1",
                                               bin.string())));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string line = error_line(r.output);
  EXPECT_NE(line.find("fetch-cold"), std::string::npos) << r.output;
  EXPECT_NE(line.find("fetch-cold.log"), std::string::npos) << r.output;
  // The three runs before it are on disk, with their reports.
  std::ifstream in(dir_ / "out" / "runs.json");
  ASSERT_TRUE(in.good()) << r.output;
  const auto runs = nlohmann::json::parse(in);
  for (const char* label : {"synthetic", "cached", "cold"}) {
    EXPECT_TRUE(runs.contains(label)) << label << "\n" << runs.dump(2);
    bool report = false;
    for (const auto& e : fs::directory_iterator(dir_ / "out" / "runs" / label)) report |= e.path().extension() == ".json";
    EXPECT_TRUE(report) << label;
  }
  EXPECT_FALSE(fs::exists(dir_ / "out" / "stall.json"));
}

// A host that reclaims page cache on its own takes pages of the dataset during warm runs (a VM
// whose DAMON pages out even files read every second); their reads go to storage, and the
// ground-truth grid measured P low enough to fail (docs/reliability.md). Here a thread asks the
// kernel to drop the dataset every 5 ms while the analysis runs: the warm runs must hold it in
// memory, so that not one of their reads goes to the (emulated) device, and the page-cache
// check's run its resident share.
TEST_F(StallCli, WarmRunsHoldTheDatasetWhileSomethingElseEvictsIt) {
  namespace st = mlbench::stall;
  const auto files = st::dataset_files(dir_ / "data");
  {
    const st::PinnedFiles probe(files);
    if (!probe.complete()) GTEST_SKIP() << "files cannot be locked in memory here: " << probe.error();
  }
  st::evict(files);
  if (st::residency(files).fraction() > 0.05) {
    GTEST_SKIP() << "the temp directory ignores POSIX_FADV_DONTNEED (tmpfs?): nothing to hold";
  }
  std::atomic<bool> stop{false};
  std::thread evictor([&] {
    while (!stop) {
      st::evict(files);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  // 4 KB files from a device of 0.4096 MB/s: a read that misses the page cache takes 10 ms.
  const auto r = run_command(
      stallsim("--iterations 8", "--batch-size 2 --workers 1 --compute-ms 0.1 --prep-ms 1 --storage-mbps 0.4096"));
  stop = true;
  evictor.join();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto runs = stall_json()["runs"];
  for (const char* label : {"cached", "fetch-cached", "cpus-1"}) {
    ASSERT_TRUE(runs.contains(label)) << label;
    const auto& run = runs[label];
    EXPECT_EQ(run["held_in_memory"], true) << label;
    EXPECT_EQ(run["pipeline"]["emulated_storage"]["device_reads"], 0) << label << ": " << run["pipeline"].dump();
    EXPECT_GT(run["pipeline"]["emulated_storage"]["cached_reads"].get<long>(), 0) << label;
  }
  EXPECT_NE(r.output.find("warm cache 100% resident, held"), std::string::npos) << r.output;
  // The cold runs could still evict it: they read from the device.
  EXPECT_GT(runs["cold"]["pipeline"]["emulated_storage"]["device_reads"].get<long>(), 0);
  EXPECT_EQ(runs["cold"]["held_in_memory"], false);
  // The page-cache check's run holds its resident half likewise: the ground-truth grid's knee at
  // 75% measured its 50% point 8% slow on CI, its resident half taken away while it ran. Half of
  // the dataset resident: about half of its reads (all of them, some twice) hit the page cache.
  ASSERT_TRUE(runs.contains("page-0.50")) << runs.dump(2);
  const auto& page = runs["page-0.50"];
  EXPECT_EQ(page["held_in_memory"], true);
  const auto cached = page["pipeline"]["emulated_storage"]["cached_reads"].get<long>();
  const auto device = page["pipeline"]["emulated_storage"]["device_reads"].get<long>();
  EXPECT_GE(cached, (cached + device) / 4) << page["pipeline"].dump();
}

// --rounds 2: every run made twice (the second into runs/<label>-r2), each rate the lower of the
// two (the lower middle of an even count), and stall.json's rounds says so.
TEST_F(StallCli, RoundsMakeEveryRunNTimesAndTheModelReadsTheMedianRound) {
  const auto r = run_command(
      stallsim("--iterations 4 --rounds 2 --max-rounds 2", "--batch-size 2 --workers 1 --compute-ms 0.1 --prep-ms 0.1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("round 2 of 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rounds: 2 (each rate from the median of its run's rounds; P's runs spread"),
            std::string::npos)
      << r.output;
  const auto j = stall_json();
  ASSERT_FALSE(j.is_null()) << r.output;
  EXPECT_EQ(j["schema_version"], 14);
  ASSERT_TRUE(j.contains("rounds")) << j.dump(2);
  EXPECT_EQ(j["rounds"]["count"], 2);
  for (const char* label : {"synthetic", "cached", "cold", "fetch-cold", "fetch-cached", "cpus-1", "cache-0.50"}) {
    const auto& run = j["rounds"]["runs"][label];
    ASSERT_EQ(run["rates"].size(), 2u) << label << "\n" << j["rounds"].dump(2);
    EXPECT_EQ(run["chosen"].get<double>(), std::min(run["rates"][0].get<double>(), run["rates"][1].get<double>()))
        << label;
    EXPECT_TRUE(fs::is_directory(dir_ / "out" / "runs" / label)) << label;
    EXPECT_TRUE(fs::is_directory(dir_ / "out" / "runs" / (std::string(label) + "-r2"))) << label;
  }
  EXPECT_EQ(j["rates"]["P"].get<double>(), j["rounds"]["runs"]["cached"]["chosen"].get<double>());
  EXPECT_EQ(j["rates"]["G"].get<double>(), j["rounds"]["runs"]["synthetic"]["chosen"].get<double>());
}

// --reanalyze: the runs of a finished analysis through the model again, nothing measured. The
// same runs give the same split and curve; the old stall.json is kept beside the new one; a folder
// without one is one line and exit 1.
TEST_F(StallCli, ReanalyzeModelsTheSameRunsAgainAndKeepsTheOldResult) {
  const auto r = run_command(stallsim("--iterations 4", "--batch-size 2 --workers 1 --compute-ms 0.1 --prep-ms 0.1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto before = stall_json();
  const auto again = run_command(fmt::format("{} --reanalyze {} 2>&1", MLBENCH_STALL_BIN, (dir_ / "out").string()));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("modelled again"), std::string::npos) << again.output;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "stall.v14.json"));
  const auto after = stall_json();
  EXPECT_EQ(after["reanalysis"]["schema_version"], 14);
  EXPECT_EQ(after["split"], before["split"]);
  EXPECT_EQ(after["rates"], before["rates"]);
  ASSERT_EQ(after["whatif"]["measured"].size(), before["whatif"]["measured"].size());
  for (std::size_t i = 0; i < after["whatif"]["measured"].size(); ++i) {
    EXPECT_NEAR(after["whatif"]["measured"][i]["predicted"].get<double>(),
                before["whatif"]["measured"][i]["predicted"].get<double>(), 1e-6);
  }
  const auto none = run_command(fmt::format("{} --reanalyze {} 2>&1", MLBENCH_STALL_BIN, (dir_ / "data").string()));
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_NE(error_line(none.output).find("--reanalyze: " + (dir_ / "data" / "stall.json").string() + ": cannot read it"),
            std::string::npos)
      << none.output;
}

// --store: the analysis in the results store with its machine (docs/report.md, "The results store");
// a store that cannot be used is one line and exit 1, with stall.json written regardless.
TEST_F(StallCli, StoreRecordsTheAnalysisAndABadStoreIsOneLineWithTheFileWritten) {
  const std::string db = (dir_ / "results.db").string();
  const auto r = run_command(
      stallsim("--iterations 4 --store " + db, "--batch-size 2 --workers 1 --compute-ms 0.1 --prep-ms 0.1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Recorded in the results store " + db), std::string::npos) << r.output;
  const auto j = stall_json();
  auto s = mlbench::store::ResultsStore::open(db);
  const auto analyses = s->stall_analyses("stallsim");
  ASSERT_EQ(analyses.size(), 1u);
  EXPECT_DOUBLE_EQ(analyses[0].prep_pct, j["split"]["prep_pct"].get<double>());
  EXPECT_DOUBLE_EQ(analyses[0].fetch_pct, j["split"]["fetch_pct"].get<double>());
  EXPECT_EQ(analyses[0].analysis["split"], j["split"]);
  ASSERT_EQ(s->machines().size(), 1u);
  EXPECT_EQ(analyses[0].machine, s->machines()[0].fingerprint);
  const fs::path bad = dir_ / "notes.db";
  std::ofstream(bad) << "not a database\n" << std::string(8192, 'x');
  const auto again = run_command(fmt::format("{} --reanalyze {} --out {} --store {} 2>&1", MLBENCH_STALL_BIN,
                                             (dir_ / "out").string(), (dir_ / "again").string(), bad.string()));
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("mlbench-stall: error: results store " + bad.string() + ": file is not a database"),
            std::string::npos)
      << again.output;
  EXPECT_TRUE(fs::exists(dir_ / "again" / "stall.json"));
}

// An analysis folder moved elsewhere (another machine, a fixture) names its runs' reports at their
// old paths: --reanalyze finds them in the folder's own runs/<label>/ (it failed: "report ... is
// missing").
TEST_F(StallCli, ReanalyzeOfAMovedAnalysisFindsItsRunsInItsOwnFolder) {
  const auto r = run_command(stallsim("--iterations 4", "--batch-size 2 --workers 1 --compute-ms 0.1 --prep-ms 0.1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto before = stall_json();
  fs::rename(dir_ / "out", dir_ / "moved");
  const auto again =
      run_command(fmt::format("{} --reanalyze {} --out {} 2>&1", MLBENCH_STALL_BIN, (dir_ / "moved").string(),
                              (dir_ / "model").string()));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  std::ifstream in(dir_ / "model" / "stall.json");
  const auto after = nlohmann::json::parse(in);
  EXPECT_EQ(after["split"], before["split"]);
  EXPECT_EQ(after["rates"], before["rates"]);
}

// On a device, mlbench-stall runs K synthetic jobs at once (K = 2, 4, 8) and the coordinated
// what-if takes what each got as its device ceiling. stallsim's emulated accelerator, named a
// device, takes that path on a machine without a GPU (each process sleeps on its own, so each job
// gets the whole of it: the plumbing is what is tested here).
TEST_F(StallCli, OnADeviceKSyntheticJobsAtOnceGiveTheCoordinatedDeviceCeiling) {
  const std::string bench_flags = "--batch-size 2 --workers 1 --compute-ms 1 --prep-ms 0.1";
  const auto r = run_command(stallsim("--iterations 4", "--device emulated " + bench_flags));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("device sharing: K synthetic jobs at once"), std::string::npos) << r.output;
  const auto j = stall_json();
  ASSERT_FALSE(j.is_null()) << r.output;
  const auto& c = j["whatif"]["coordinated"];
  EXPECT_EQ(c["devices"], 1) << c.dump(2);
  ASSERT_EQ(c["predictions"].size(), 3u) << c.dump(2);
  for (const auto& p : c["predictions"]) {
    const int k = p["jobs"].get<int>();
    const std::string label = fmt::format("synthetic-x{}", k);
    ASSERT_TRUE(j["runs"].contains(label)) << label << "\n" << j["runs"].dump(2);
    EXPECT_EQ(j["runs"][label]["nodes"].size(), static_cast<std::size_t>(k)) << label;
    EXPECT_EQ(p["device_per_job_from"], "measured") << p.dump();
    EXPECT_DOUBLE_EQ(p["device_per_job"].get<double>(), j["runs"][label]["rate"].get<double>()) << label;
    EXPECT_GT(p["device_per_job"].get<double>(), 0.0) << label;
    for (int n = 0; n < k; ++n) {
      EXPECT_TRUE(fs::is_directory(dir_ / "out" / "runs" / label / fmt::format("node{}", n))) << label << " " << n;
    }
  }
  EXPECT_NE(r.output.find("a job's device ceiling (samples/s): 2 jobs"), std::string::npos) << r.output;
  // Without a device (the default, cpu) no such runs.
  fs::remove_all(dir_ / "out");
  const auto cpu = run_command(stallsim("--iterations 4", bench_flags));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_EQ(cpu.output.find("device sharing"), std::string::npos) << cpu.output;
  EXPECT_FALSE(fs::exists(dir_ / "out" / "runs" / "synthetic-x2"));
}

// Runs sized by their noise (docs/stall.md, "How runs are sized"): a target no run of a few
// iterations meets makes the runs extend until their --max-run-time and say so; stall.json has
// each run's sizing, the model reads the pooled rate, and --reanalyze reads it again. With
// --target-noise 0 every run is made once, as --iterations says.
TEST_F(StallCli, ARunWiderThanTheTargetIsExtendedUntilItsLimitAndSaysSo) {
  const std::string bench = "--batch-size 2 --workers 1 --compute-ms 0.1 --prep-ms 0.1";
  const auto r = run_command(stallsim("--iterations 4 --target-noise 0.1 --max-run-time 5", bench));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = stall_json();
  ASSERT_FALSE(j.is_null()) << r.output;
  const auto& s = j["sizing"];
  EXPECT_EQ(s["rule"], "noise");
  EXPECT_DOUBLE_EQ(s["target_pct"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(s["max_run_s"].get<double>(), 5.0);
  EXPECT_TRUE(s["not_within"].contains("cached")) << s.dump(1);
  EXPECT_NE(r.output.find("sized: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not within ±0.1%"), std::string::npos) << r.output;
  const auto& cached = j["runs"]["cached"]["sizing"];
  EXPECT_FALSE(cached["within"].get<bool>()) << cached.dump();
  EXPECT_TRUE(cached["limit_hit"].get<bool>()) << cached.dump();
  EXPECT_GT(cached["half_width_pct"].get<double>(), 0.1);
  ASSERT_GT(cached["extensions"].get<int>(), 0) << cached.dump() << "\n" << r.output;
  EXPECT_TRUE(fs::is_directory(dir_ / "out" / "runs" / "cached-ext2"));
  // An extension starts only when it is predicted to fit; a loaded host may still make it run over.
  EXPECT_LE(cached["duration_s"].get<double>(), 2 * 5.0);
  EXPECT_DOUBLE_EQ(cached["limit_s"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(j["rates"]["P"].get<double>(), cached["pooled"]["rate"].get<double>());
  const auto again = run_command(fmt::format("{} --reanalyze {} 2>&1", MLBENCH_STALL_BIN, (dir_ / "out").string()));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(stall_json()["rates"], j["rates"]);
  EXPECT_EQ(stall_json()["sizing"], j["sizing"]);

  fs::remove_all(dir_ / "out");
  const auto fixed = run_command(stallsim("--iterations 4 --target-noise 0", bench));
  ASSERT_EQ(fixed.exit_code, 0) << fixed.output;
  j = stall_json();
  EXPECT_EQ(j["sizing"]["rule"], "fixed");
  EXPECT_EQ(j["sizing"]["extended"], 0);
  EXPECT_EQ(j["runs"]["cached"]["sizing"]["extensions"], 0);
  EXPECT_FALSE(fs::exists(dir_ / "out" / "runs" / "cached-ext2"));
}

}  // namespace
