// The results store (docs/report.md, "The results store"): every run, machine,
// instance report and mlbench-stall analysis in one database, SQLite (a file, the
// default: <outdir>/results.db) or PostgreSQL (postgresql://...). The JSON files stay
// the source of truth; the store can always be rebuilt from them (mlbench-report
// --import). Written as runs go, read by mlbench-report's --history and --machines.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/instance_report.h"
#include "core/stall_record.h"
#include "store/database.h"

namespace mlbench::store {

// The schema this binary writes. A store of an older version is migrated on open; a
// newer one is refused with one line (an older binary must not write a newer store).
inline constexpr int kStoreSchemaVersion = 1;

// The machine: the report's machine block, its fingerprint and kind.
struct MachineRecord {
  std::string fingerprint;  // sha256 (16 hex) of hostname, CPU model, cores, memory (GiB), GPUs
  std::string kind;         // what targets are made for: the GPU model, else "CPU: <model> x<cores>"
  std::string hostname, cpu_model, kernel, cgroup_mode, blas, libtorch, driver;
  std::int64_t logical_cores = 0, memory_bytes = 0, gpu_count = 0;
  std::string gpu_model;  // "" without GPUs
  nlohmann::json json;    // the machine block as written
};
// From a report's machine block (nullopt fields stay empty).
MachineRecord machine_record(const core::MachineInfo& machine, const nlohmann::json& raw_machine);
// The machine this process runs on (core::machine_info()).
MachineRecord this_machine();
// "CPU: AMD EPYC 7B13 x2" or the first GPU's model.
std::string machine_kind(const std::string& cpu_model, std::int64_t logical_cores,
                         const std::vector<std::string>& gpus);

struct RunRecord {
  std::string run_id;  // mlbench-run's "<UTC timestamp>-<pid>", or "import-<hash>" for a folder without one
  std::string suite, jobs_file, started_at, finished_at;  // ISO 8601 UTC; finished_at "" while it runs
  std::string status = "running";                         // "running", "finished", "interrupted", "imported"
  std::string mlbench_version, mlbench_commit, command, outdir, label;
  std::string machine;  // fingerprint
};

// An instance report, its queried fields as columns (what mlbench-report's readers make of it).
struct InstanceRecord {
  std::string run_id;
  std::int64_t pass = 0, slot = 0;
  std::string bench, job, file;  // bench: the report's name; job: the runner's job; file: relative path
  bool failed = false;
  std::string reason;
  std::optional<double> items_per_s, stall_pct, wait_s, h2d_s, compute_s;
  // The data pipeline's busy time per item (ms) in fetch stages (read) and prep stages (the rest).
  std::optional<double> fetch_ms_per_item, prep_ms_per_item;
  std::string start_time;
  nlohmann::json report;  // the whole report (query results carry it only when asked)
};

// An mlbench-stall analysis: the split, its rates, the verdict and recommendation, and the whole stall.json.
struct StallAnalysisRecord {
  std::string analysis_id;  // sha256 (16 hex) of the stall.json text: importing twice records it once
  std::string run_id;       // "" when not part of a suite run
  std::string bench, machine, recorded_at, data;
  double compute_pct = 0, prep_pct = 0, fetch_pct = 0;
  std::optional<double> items_per_s_cold, items_per_s_warm;  // rates F_obs (cold) and P (prep-bound)
  std::string verdict, recommendation;
  nlohmann::json analysis;
};
StallAnalysisRecord stall_analysis_record(const core::StallRecord& stall, const std::string& stall_json_text);

// What the views query: instances with their run's time and machine.
struct InstanceQuery {
  std::string bench = "";    // "" = every benchmark
  std::string machine = "";  // fingerprint; "" = every machine
  std::string suite = "";    // "" = every suite
  bool with_report = false;
};
struct HistoryInstance {
  InstanceRecord instance;
  RunRecord run;
};

class ResultsStore {
 public:
  // `spec`: a file path (SQLite) or a postgresql:// URL. Creates and migrates the
  // schema; throws StoreError (one line naming the store and the cause). Access::kReadOnly
  // (the views) creates and migrates nothing, and reads a SQLite store on a read-only mount.
  static std::unique_ptr<ResultsStore> open(const std::string& spec, Access access = Access::kReadWrite);
  explicit ResultsStore(std::unique_ptr<Database> db, Access access = Access::kReadWrite);

  Database& database() { return *db_; }
  const std::string& name() const { return name_; }
  int schema_version();

  // Writers: one transaction each, idempotent (the same key again replaces or is kept).
  // Every text and JSON they store goes through core::mask_credentials: a store never
  // holds a password (a run's command line with its --store URL, a report's runner block).
  void record_machine(const MachineRecord& m);
  void record_run(const RunRecord& run);  // insert, or update status/finished_at of the same run_id
  // Records the instance; a report of the same run, pass, job and slot replaces the one
  // before it (--resume reruns an instance whose report failed).
  void record_instance(const InstanceRecord& inst);
  void record_stall(const StallAnalysisRecord& analysis);
  // Whether a report file of that run is in the store (import skips it).
  bool has_instance(const std::string& run_id, const std::string& file);

  // Readers.
  std::vector<RunRecord> runs(const std::string& suite = "");
  std::optional<RunRecord> run(const std::string& run_id);
  std::vector<MachineRecord> machines();
  std::vector<HistoryInstance> instances(const InstanceQuery& q);
  std::vector<StallAnalysisRecord> stall_analyses(const std::string& bench = "");

 private:
  std::unique_ptr<Database> db_;
  std::string name_;
};

// mlbench-stall --store: records the analysis in `stall_json` (and this machine) in the
// store `spec`; throws StoreError (the store) or core::ReportFormatError (the file).
void record_stall_file(const std::string& spec, const std::filesystem::path& stall_json);

// Whether `spec` names a PostgreSQL server rather than a file.
bool is_postgresql_url(const std::string& spec);

}  // namespace mlbench::store
