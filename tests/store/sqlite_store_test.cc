// The results store on SQLite: round trips, idempotence, --resume's supersession, and
// the faults a user meets (a file that is not a database, a read-only or locked store,
// a store of a newer schema), each one line naming the store.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "report/store_rows.h"
#include "store/results_store.h"
#include "store/schema.h"

namespace fs = std::filesystem;
using namespace mlbench;
using store::ResultsStore;
using store::StoreError;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "mlbench-store-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

store::MachineRecord machine(const std::string& host) {
  core::MachineInfo m;
  m.hostname = host;
  m.cpu_model = "AMD EPYC 7B13";
  m.logical_cores = 2;
  m.memory_bytes = std::int64_t{24} << 30;
  return store::machine_record(m, nlohmann::json{{"hostname", host}});
}

store::RunRecord run(const std::string& id, const std::string& fingerprint, const std::string& when) {
  store::RunRecord r;
  r.run_id = id;
  r.suite = "fast";
  r.started_at = when;
  r.machine = fingerprint;
  r.command = "mlbench-run --jobs configs/fast.json";
  return r;
}

store::InstanceRecord instance(const std::string& run_id, const std::string& file, double items_per_s) {
  store::InstanceRecord i;
  i.run_id = run_id;
  i.file = file;
  i.bench = "loader";
  i.job = "loader";
  i.items_per_s = items_per_s;
  i.stall_pct = 40.0;
  i.report = {{"name", "loader"}};
  return i;
}

std::string string_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const StoreError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(SqliteStore, RecordsAndReadsBackRunsMachinesInstancesAndAnalyses) {
  TempDir t;
  const std::string db = (t.path() / "results.db").string();
  {
    auto s = ResultsStore::open(db);
    EXPECT_EQ(s->schema_version(), store::kStoreSchemaVersion);
    const auto m = machine("vm1");
    s->record_machine(m);
    s->record_run(run("r1", m.fingerprint, "2026-11-28T10:00:00Z"));
    auto i = instance("r1", "R0/fast.loader.R0.D0.20261128-100000-1.json", 1234.5);
    i.fetch_ms_per_item = 0.25;
    i.prep_ms_per_item = std::nullopt;
    s->record_instance(i);
    store::StallAnalysisRecord a;
    a.analysis_id = "abc";
    a.bench = "loader";
    a.machine = m.fingerprint;
    a.prep_pct = 60;
    a.verdict = "prep-bound";
    a.analysis = {{"bench", "loader"}};
    s->record_stall(a);
  }
  auto s = ResultsStore::open(db);  // a second open finds the schema and migrates nothing
  const auto machines = s->machines();
  ASSERT_EQ(machines.size(), 1u);
  EXPECT_EQ(machines[0].kind, "CPU: AMD EPYC 7B13 x2");
  EXPECT_EQ(machines[0].json["hostname"], "vm1");
  const auto rows = s->instances({.bench = "loader", .with_report = true});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(*rows[0].instance.items_per_s, 1234.5);
  EXPECT_DOUBLE_EQ(*rows[0].instance.fetch_ms_per_item, 0.25);
  EXPECT_FALSE(rows[0].instance.prep_ms_per_item.has_value());
  EXPECT_EQ(rows[0].run.command, "mlbench-run --jobs configs/fast.json");
  EXPECT_EQ(rows[0].instance.report["name"], "loader");
  EXPECT_TRUE(s->instances({.bench = "convnet"}).empty());
  const auto analyses = s->stall_analyses("loader");
  ASSERT_EQ(analyses.size(), 1u);
  EXPECT_EQ(analyses[0].verdict, "prep-bound");
  EXPECT_DOUBLE_EQ(analyses[0].prep_pct, 60);
}

TEST(SqliteStore, TheSameReportTwiceIsOneRowAndARerunReplacesItsFailedReport) {
  TempDir t;
  auto s = ResultsStore::open((t.path() / "r.db").string());
  const auto m = machine("vm1");
  s->record_machine(m);
  s->record_run(run("r1", m.fingerprint, "2026-11-28T10:00:00Z"));
  auto failed = instance("r1", "R0/fast.loader.R0.D0.FAIL.20261128-100000-1.json", 0);
  failed.failed = true;
  failed.items_per_s = std::nullopt;
  s->record_instance(failed);
  s->record_instance(failed);
  EXPECT_EQ(s->instances({}).size(), 1u);
  EXPECT_TRUE(s->has_instance("r1", failed.file));
  // --resume: the instance ran again and passed; its FAIL record goes.
  s->record_instance(instance("r1", "R0/fast.loader.R0.D0.20261128-110000-2.json", 900));
  const auto rows = s->instances({});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].instance.failed);
  // Another slot or pass is another instance.
  s->record_instance(instance("r1", "R1/fast.loader.R1.D0.20261128-120000-3.json", 910));
  EXPECT_EQ(s->instances({}).size(), 2u);
  // A run recorded again keeps its facts and takes the new status.
  auto done = run("r1", m.fingerprint, "2026-11-28T10:00:00Z");
  done.status = "finished";
  done.finished_at = "2026-11-28T12:00:00Z";
  s->record_run(done);
  EXPECT_EQ(s->run("r1")->status, "finished");
  EXPECT_EQ(s->runs().size(), 1u);
}

TEST(SqliteStore, AStoreOfANewerSchemaIsRefusedInOneLine) {
  TempDir t;
  const std::string db = (t.path() / "new.db").string();
  {
    auto s = ResultsStore::open(db);
    s->database().exec("INSERT INTO mlbench_schema (version) VALUES (99)");
  }
  const std::string err = string_error([&] { ResultsStore::open(db); });
  EXPECT_NE(err.find(db + ": its schema is version 99, newer than this mlbench's (1)"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos);
}

// A damaged mlbench_schema table (emptied, dropped, version 0 or -1 beside mlbench's tables) is
// one line naming the store, what is wrong and what to do. It was "table machines already
// exists" (a migration from 0 over the tables) or "vector::_M_range_check" naming no store.
TEST(SqliteStore, ADamagedSchemaTableIsOneLineSayingWhatIsWrongAndWhatToDo) {
  const std::vector<std::pair<std::string, std::string>> damages = {
      {"DELETE FROM mlbench_schema", "its mlbench_schema table is empty"},
      {"DROP TABLE mlbench_schema", "its mlbench_schema table is missing"},
      {"UPDATE mlbench_schema SET version = 0", "its mlbench_schema table says version 0"},
      {"UPDATE mlbench_schema SET version = -1", "its mlbench_schema table says version -1"},
  };
  for (const auto& [sql, what] : damages) {
    TempDir t;
    const std::string db = (t.path() / "results.db").string();
    {
      auto s = ResultsStore::open(db);
      s->record_machine(machine("vm1"));
      s->database().exec(sql);
    }
    std::string err;
    try {
      ResultsStore::open(db);
    } catch (const StoreError& e) {
      err = e.what();
    } catch (const std::exception& e) {
      err = std::string("not a StoreError: ") + e.what();
    }
    EXPECT_TRUE(err.starts_with(db + ": " + what + ", but the store holds mlbench's tables")) << sql << ": " << err;
    EXPECT_NE(
        err.find("move it aside and rebuild it from the run folders (mlbench-report --store " + db + " --import DIR)"),
        std::string::npos)
        << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    // Left as it was: the damage is not made worse.
    auto raw = store::open_sqlite(db);
    EXPECT_EQ(raw->query("SELECT count(*) FROM machines").at(0).at(0), "1") << sql;
  }
}

TEST(SqliteStore, AnEmptyDatabaseIsMigratedFromVersionZero) {
  TempDir t;
  const std::string db = (t.path() / "old.db").string();
  { store::open_sqlite(db)->exec("CREATE TABLE unrelated (x TEXT)"); }
  auto s = ResultsStore::open(db);
  EXPECT_EQ(s->schema_version(), 1);
  EXPECT_EQ(store::migrations().size(), static_cast<std::size_t>(store::kStoreSchemaVersion));
}

TEST(SqliteStore, AFileThatIsNotADatabaseIsOneLineNamingIt) {
  TempDir t;
  const fs::path f = t.path() / "notes.txt";
  std::ofstream(f) << "these are not the results you are looking for\n" << std::string(4096, 'x');
  const std::string err = string_error([&] { ResultsStore::open(f.string()); });
  EXPECT_NE(err.find(f.string() + ": file is not a database"), std::string::npos) << err;
}

TEST(SqliteStore, AStoreInAFolderThatDoesNotExistNamesIt) {
  const std::string err = string_error([] { ResultsStore::open("/nonexistent-mlbench-dir/results.db"); });
  EXPECT_NE(err.find("/nonexistent-mlbench-dir/results.db: unable to open database file"), std::string::npos) << err;
}

TEST(SqliteStore, AReadOnlyStoreIsReadAndRefusesWritesInOneLine) {
  TempDir t;
  const fs::path db = t.path() / "ro.db";
  {
    auto s = ResultsStore::open(db.string());
    const auto m = machine("vm1");
    s->record_machine(m);
    s->database().exec("PRAGMA wal_checkpoint(TRUNCATE)");
    s->database().exec("PRAGMA journal_mode=DELETE");
  }
  // Read-only as a file and in a read-only folder (root ignores the mode bits; the
  // read-only open of sqlite3 is what a read-only mount gives).
  ::chmod(db.c_str(), 0444);
  auto s = std::make_unique<ResultsStore>(store::open_sqlite("file:" + db.string() + "?mode=ro"));
  EXPECT_EQ(s->machines().size(), 1u);
  const std::string err = string_error([&] { s->record_machine(machine("vm2")); });
  EXPECT_NE(err.find("readonly database"), std::string::npos) << err;
}

TEST(SqliteStore, AStoreLockedPastTheBusyTimeoutIsOneLine) {
  TempDir t;
  const std::string db = (t.path() / "locked.db").string();
  auto holder = ResultsStore::open(db);
  holder->database().begin_write();  // another writer holds the lock and does not let go
  auto waiter = std::make_unique<ResultsStore>(store::open_sqlite(db, 50));
  const std::string err = string_error([&] { waiter->record_machine(machine("vm1")); });
  EXPECT_EQ(err, db + ": database is locked");
  holder->database().rollback();
  waiter->record_machine(machine("vm1"));
  EXPECT_EQ(waiter->machines().size(), 1u);
}

TEST(SqliteStore, MachinesOfTheSameKindAndHostShareAFingerprint) {
  core::MachineInfo a;
  a.hostname = "vm";
  a.cpu_model = "AMD EPYC 7B13";
  a.logical_cores = 2;
  a.memory_bytes = (std::int64_t{24} << 30) - 4096 * 3;  // MemTotal moves by a few pages
  core::MachineInfo b = a;
  b.memory_bytes = (std::int64_t{24} << 30) + 4096;
  EXPECT_EQ(store::machine_record(a, {}).fingerprint, store::machine_record(b, {}).fingerprint);
  b.hostname = "other";
  EXPECT_NE(store::machine_record(a, {}).fingerprint, store::machine_record(b, {}).fingerprint);
  EXPECT_EQ(store::machine_record(b, {}).kind, store::machine_record(a, {}).kind);
  a.gpus = {"NVIDIA H200"};
  EXPECT_EQ(store::machine_record(a, {}).kind, "NVIDIA H200");
}

TEST(SqliteStore, AnInstanceReportBecomesItsColumns) {
  nlohmann::json j = {{"schema_version", 1},
                      {"name", "loader"},
                      {"suite", "fast"},
                      {"completed", true},
                      {"train_item", {{"avg", 800.0}, {"unit", "items/s"}}},
                      {"stall", {{"stall_pct", 55.0}, {"wait", {{"avg", 0.02}}}, {"compute", {{"avg", 0.01}}}}},
                      {"pipeline",
                       {{"stages",
                         {{"fetch", {{"busy_s", 1.0}, {"per_item_ms", 0.1}, {"items", 10}}},
                          {"decode", {{"busy_s", 3.0}, {"per_item_ms", 0.3}, {"items", 10}}},
                          {"augment", {{"busy_s", 2.0}, {"per_item_ms", 0.2}, {"items", 10}}}}}}},
                      {"runner", {{"job", "loader"}, {"slot", 1}, {"run_id", "20261128-100000-7"}}},
                      {"jr_id", 1}};
  const auto r = core::parse_instance_report(j);
  ASSERT_TRUE(r.runner && r.runner->run_id);
  EXPECT_EQ(*r.runner->run_id, "20261128-100000-7");
  const auto i = report::instance_record(r, "R0/fast.loader.R0.D1.20261128-100001-1.json", "x", 0);
  EXPECT_FALSE(i.failed) << i.reason;
  EXPECT_EQ(i.slot, 1);
  EXPECT_DOUBLE_EQ(*i.items_per_s, 800.0);
  EXPECT_DOUBLE_EQ(*i.stall_pct, 55.0);
  EXPECT_DOUBLE_EQ(*i.fetch_ms_per_item, 0.1);
  EXPECT_DOUBLE_EQ(*i.prep_ms_per_item, 0.5);
  EXPECT_EQ(i.report["runner"]["run_id"], "20261128-100000-7");
}

// A number goes in and comes back as the same double (mlbench-report's history and targets are
// computed from them): SQLite's own text of a REAL has 15 digits, which moved 33.917372708579798
// to 33.91737270857984 (a stall split read back from the store differed from stall.json's).
TEST(SqliteStore, NumbersComeBackAsTheSameDouble) {
  TempDir t;
  auto s = ResultsStore::open((t.path() / "n.db").string());
  const auto m = machine("vm1");
  s->record_machine(m);
  s->record_run(run("r1", m.fingerprint, "2026-11-28T10:00:00Z"));
  std::vector<double> values = {33.917372708579798, 45.644159134263496, 0.1, 1.0 / 3.0, 1e-300, 123456789.123456789};
  std::uint64_t x = 88172645463325252ull;
  for (int k = 0; k < 200; ++k) {  // xorshift: doubles of every magnitude in [1e-3, 1e6)
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values.push_back(std::ldexp(static_cast<double>(x >> 11), -53) * std::pow(10.0, static_cast<int>(x % 10) - 3));
  }
  for (std::size_t k = 0; k < values.size(); ++k) {
    auto i = instance("r1", "R0/fast.loader.R" + std::to_string(k) + ".D0.x.json", values[k]);
    i.pass = static_cast<std::int64_t>(k);
    s->record_instance(i);
  }
  const auto rows = s->instances({});
  ASSERT_EQ(rows.size(), values.size());
  int differ = 0;
  for (const auto& h : rows) {
    const double want = values.at(static_cast<std::size_t>(h.instance.pass));
    if (*h.instance.items_per_s != want) ++differ;
  }
  EXPECT_EQ(differ, 0) << "of " << values.size();
}
