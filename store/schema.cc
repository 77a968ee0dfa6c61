// The schema, version by version (schema.h). Types are the ones both servers know:
// TEXT, BIGINT, DOUBLE PRECISION; a boolean is 0/1.
#include "store/schema.h"

#include <chrono>

#include <fmt/format.h>

#include "core/build_info.h"
#include "core/report_name.h"

namespace mlbench::store {

const std::vector<std::string>& migrations() {
  static const std::vector<std::string> m = {
      // 1: machines, runs, instance reports, stall analyses.
      R"sql(
CREATE TABLE machines (
  fingerprint TEXT PRIMARY KEY, kind TEXT NOT NULL, hostname TEXT, cpu_model TEXT, logical_cores BIGINT,
  memory_bytes BIGINT, gpu_model TEXT, gpu_count BIGINT, driver TEXT, blas TEXT, libtorch TEXT,
  cgroup_mode TEXT, kernel TEXT, machine_json TEXT);
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY, suite TEXT, jobs_file TEXT, started_at TEXT, finished_at TEXT, status TEXT,
  mlbench_version TEXT, mlbench_commit TEXT, command TEXT, outdir TEXT, label TEXT,
  machine TEXT REFERENCES machines(fingerprint));
CREATE TABLE instances (
  run_id TEXT NOT NULL REFERENCES runs(run_id), file TEXT NOT NULL, instance_key TEXT NOT NULL,
  pass BIGINT, slot BIGINT, bench TEXT, job TEXT, failed BIGINT, reason TEXT,
  items_per_s DOUBLE PRECISION, stall_pct DOUBLE PRECISION, wait_s DOUBLE PRECISION, h2d_s DOUBLE PRECISION,
  compute_s DOUBLE PRECISION, fetch_ms_per_item DOUBLE PRECISION, prep_ms_per_item DOUBLE PRECISION,
  start_time TEXT, report_json TEXT, PRIMARY KEY (run_id, file));
CREATE INDEX instances_by_bench ON instances (bench, run_id);
CREATE INDEX instances_by_key ON instances (run_id, instance_key);
CREATE TABLE stall_analyses (
  analysis_id TEXT PRIMARY KEY, run_id TEXT, bench TEXT, machine TEXT, recorded_at TEXT, data TEXT,
  compute_pct DOUBLE PRECISION, prep_pct DOUBLE PRECISION, fetch_pct DOUBLE PRECISION,
  items_per_s_cold DOUBLE PRECISION, items_per_s_warm DOUBLE PRECISION, verdict TEXT, recommendation TEXT,
  analysis_json TEXT);
CREATE INDEX stall_by_bench ON stall_analyses (bench, machine);
)sql",
  };
  return m;
}

namespace {

bool has_table(Database& db, const std::string& table) {
  const std::string sql = db.kind() == "sqlite" ? "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
                                                : "SELECT count(*) FROM information_schema.tables WHERE table_name = ? "
                                                  "AND table_schema = current_schema()";
  const auto rows = db.query(sql, {table});
  return !rows.empty() && rows[0][0] && *rows[0][0] != "0";
}

// Whether the tables of the first migration are there: a store whose mlbench_schema says
// "nothing yet" while they are is damaged, not new (migrating it fails half way).
bool has_store_tables(Database& db) {
  for (const char* table : {"machines", "runs", "instances", "stall_analyses"}) {
    if (has_table(db, table)) return true;
  }
  return false;
}

// One line: what is wrong with which store, and what to do.
[[noreturn]] void refuse_damaged(Database& db, const std::string& what) {
  throw StoreError(fmt::format(
      "{}: {}, but the store holds mlbench's tables: its schema table was damaged; move it aside and rebuild it "
      "from the run folders (mlbench-report --store {} --import DIR)",
      db.name(), what, db.name()));
}

void refuse_newer(Database& db, int version, int target) {
  if (version > target) {
    throw StoreError(fmt::format("{}: its schema is version {}, newer than this mlbench's ({}); use a newer mlbench",
                                 db.name(), version, target));
  }
}

}  // namespace

namespace {

int read_schema_version_once(Database& db) {
  if (!has_table(db, "mlbench_schema")) {
    if (has_store_tables(db)) refuse_damaged(db, "its mlbench_schema table is missing");
    return 0;
  }
  const auto rows = db.query("SELECT max(version) FROM mlbench_schema");
  if (rows.empty() || !rows[0][0]) {
    if (has_store_tables(db)) refuse_damaged(db, "its mlbench_schema table is empty");
    return 0;
  }
  int version = 0;
  try {
    std::size_t used = 0;
    version = std::stoi(*rows[0][0], &used);
    if (used != rows[0][0]->size()) throw std::invalid_argument("trailing text");
  } catch (const std::exception&) {
    refuse_damaged(db, fmt::format("its mlbench_schema table says version '{}'", *rows[0][0]));
  }
  if (version < 0 || (version == 0 && has_store_tables(db))) {
    refuse_damaged(db, fmt::format("its mlbench_schema table says version {}", version));
  }
  return version;
}

}  // namespace

// Each check is a statement of its own: one that ran before another writer committed the store's
// creation (its tables and its schema table at once) and one that ran after see a store with
// tables and no schema table. Damage is what a second reading still sees.
int read_schema_version(Database& db) {
  try {
    return read_schema_version_once(db);
  } catch (const StoreError&) {
    return read_schema_version_once(db);
  }
}

void migrate(Database& db, int target, Access access) {
  const int seen = read_schema_version(db);
  refuse_newer(db, seen, target);
  if (seen == target) return;
  if (access == Access::kReadOnly) {
    throw StoreError(fmt::format(
        "{}: {}, and it is opened read-only: open it once with a command that writes (mlbench-report --store {} "
        "--import DIR) to bring it to version {}",
        db.name(), seen == 0 ? "it holds no mlbench store" : fmt::format("its schema is version {}", seen), db.name(),
        target));
  }
  in_write_transaction(db, [&] {
    // Another writer may have migrated it while this one waited for the lock.
    db.exec("CREATE TABLE IF NOT EXISTS mlbench_schema (version BIGINT NOT NULL, migrated_at TEXT, mlbench TEXT)");
    const int now = read_schema_version(db);
    refuse_newer(db, now, target);
    for (int v = now + 1; v <= target; ++v) {
      db.exec(migrations().at(static_cast<std::size_t>(v - 1)));
      db.query("INSERT INTO mlbench_schema (version, migrated_at, mlbench) VALUES (?, ?, ?)",
               {std::to_string(v), core::utc_iso8601(std::chrono::system_clock::now()),
                std::string(core::build_info::kVersion)});
    }
  });
}

}  // namespace mlbench::store
