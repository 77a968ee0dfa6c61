// The results store (results_store.h): the SQL behind each writer and reader, once for
// both back-ends.
#include "store/results_store.h"

#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "core/cli.h"
#include "core/credentials.h"
#include "core/sysinfo.h"
#include "store/schema.h"

namespace mlbench::store {

namespace {

Value text(const std::string& s) {
  return s;
}
// Free text and whole JSON documents (not keys): a password in them is masked.
Value masked(const std::string& s) {
  return core::mask_credentials(s);
}
Value json_text(nlohmann::json j) {
  core::mask_credentials(j);
  return j.dump();
}
Value integer(std::int64_t v) {
  return std::to_string(v);
}
Value number(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return std::nullopt;
  return fmt::format("{}", *v);
}

std::string str(const Value& v) {
  return v ? *v : std::string();
}
std::int64_t to_int(const Value& v) {
  if (!v || v->empty()) return 0;
  try {
    return static_cast<std::int64_t>(std::stoll(*v));
  } catch (const std::exception&) {
    return 0;
  }
}
std::optional<double> to_number(const Value& v) {
  if (!v || v->empty()) return std::nullopt;
  try {
    return std::stod(*v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}
nlohmann::json to_json(const Value& v) {
  if (!v || v->empty()) return nullptr;
  return nlohmann::json::parse(*v, nullptr, false);
}

// A report file's instance: its name up to ".R<pass>.D<slot>." (what --resume reruns), else the file.
std::string instance_key(const std::string& file) {
  static const std::regex key(R"(^(.*\.R[0-9]+\.D[0-9]+\.))");
  std::smatch m;
  const std::string base = file.substr(file.find_last_of('/') + 1);
  const std::string dir = file.size() > base.size() ? file.substr(0, file.size() - base.size()) : "";
  return std::regex_search(base, m, key) ? dir + m[1].str() : file;
}

constexpr const char* kRunColumns =
    "r.run_id, r.suite, r.jobs_file, r.started_at, r.finished_at, r.status, r.mlbench_version, r.mlbench_commit, "
    "r.command, r.outdir, r.label, r.machine";

RunRecord run_from(const Row& r, std::size_t at = 0) {
  RunRecord run;
  run.run_id = str(r[at + 0]);
  run.suite = str(r[at + 1]);
  run.jobs_file = str(r[at + 2]);
  run.started_at = str(r[at + 3]);
  run.finished_at = str(r[at + 4]);
  run.status = str(r[at + 5]);
  run.mlbench_version = str(r[at + 6]);
  run.mlbench_commit = str(r[at + 7]);
  run.command = str(r[at + 8]);
  run.outdir = str(r[at + 9]);
  run.label = str(r[at + 10]);
  run.machine = str(r[at + 11]);
  return run;
}

}  // namespace

bool is_postgresql_url(const std::string& spec) {
  return spec.starts_with("postgresql://") || spec.starts_with("postgres://");
}

std::string machine_kind(const std::string& cpu_model, std::int64_t logical_cores,
                         const std::vector<std::string>& gpus) {
  if (!gpus.empty()) return gpus.front();
  return fmt::format("CPU: {} x{}", cpu_model.empty() ? "unknown" : cpu_model, logical_cores);
}

MachineRecord machine_record(const core::MachineInfo& m, const nlohmann::json& raw) {
  MachineRecord r;
  r.hostname = m.hostname;
  r.cpu_model = m.cpu_model;
  r.kernel = m.kernel;
  r.cgroup_mode = m.cgroup_mode;
  r.logical_cores = m.logical_cores;
  r.memory_bytes = m.memory_bytes;
  r.gpu_count = static_cast<std::int64_t>(m.gpus.size());
  r.gpu_model = m.gpus.empty() ? "" : m.gpus.front();
  if (m.blas) r.blas = m.blas->name.empty() ? m.blas->library : m.blas->name;
  if (!m.framework.empty()) r.libtorch = m.framework + (m.framework_version.empty() ? "" : " " + m.framework_version);
  for (const char* key : {"driver", "gpu_driver", "driver_version"}) {
    if (raw.is_object() && raw.contains(key) && raw[key].is_string()) r.driver = raw[key].get<std::string>();
  }
  r.kind = machine_kind(m.cpu_model, m.logical_cores, m.gpus);
  // Memory in whole GiB: the kernel's MemTotal moves by a few pages between boots.
  const std::int64_t gib = (m.memory_bytes + (std::int64_t{1} << 29)) >> 30;
  std::string gpus;
  for (const auto& g : m.gpus) gpus += g + ";";
  r.fingerprint = core::sha256_hex(fmt::format("{}|{}|{}|{}|{}", m.hostname, m.cpu_model, m.logical_cores, gib, gpus))
                      .substr(0, 16);
  r.json = raw.is_null() ? nlohmann::json::object() : raw;
  return r;
}

MachineRecord this_machine() {
  const core::MachineInfo info = core::machine_info();
  return machine_record(info, core::to_json(info));
}

StallAnalysisRecord stall_analysis_record(const core::StallRecord& s, const std::string& stall_json_text) {
  StallAnalysisRecord a;
  a.analysis_id = core::sha256_hex(stall_json_text).substr(0, 16);
  a.bench = s.bench;
  a.data = s.data;
  a.compute_pct = s.split.compute_pct;
  a.prep_pct = s.split.prep_pct;
  a.fetch_pct = s.split.fetch_pct;
  if (s.rates) {
    a.items_per_s_cold = s.rates->F_obs;
    a.items_per_s_warm = s.rates->P;
  }
  if (s.recommendation) {
    a.verdict = s.recommendation->verdict;
    a.recommendation = s.recommendation->remedy_text;
  }
  a.analysis = s.raw.is_null() ? nlohmann::json::parse(stall_json_text, nullptr, false) : s.raw;
  return a;
}

std::unique_ptr<ResultsStore> ResultsStore::open(const std::string& spec, Access access) {
  if (spec.empty()) throw StoreError("the store is empty: give a file or a postgresql:// URL");
  std::unique_ptr<Database> db = is_postgresql_url(spec) ? open_postgresql(spec) : open_sqlite(spec, 60000, access);
  return std::make_unique<ResultsStore>(std::move(db), access);
}

ResultsStore::ResultsStore(std::unique_ptr<Database> db, Access access) : db_(std::move(db)), name_(db_->name()) {
  migrate(*db_, kStoreSchemaVersion, access);
}

int ResultsStore::schema_version() {
  return read_schema_version(*db_);
}

void ResultsStore::record_machine(const MachineRecord& m) {
  in_write_transaction(*db_, [&] {
    db_->query(
        "INSERT INTO machines (fingerprint, kind, hostname, cpu_model, logical_cores, memory_bytes, gpu_model, "
        "gpu_count, driver, blas, libtorch, cgroup_mode, kernel, machine_json) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fingerprint) DO UPDATE SET "
        "kind = excluded.kind, driver = excluded.driver, blas = excluded.blas, libtorch = excluded.libtorch, "
        "cgroup_mode = excluded.cgroup_mode, kernel = excluded.kernel, machine_json = excluded.machine_json",
        {text(m.fingerprint), text(m.kind), text(m.hostname), text(m.cpu_model), integer(m.logical_cores),
         integer(m.memory_bytes), text(m.gpu_model), integer(m.gpu_count), text(m.driver), text(m.blas),
         text(m.libtorch), text(m.cgroup_mode), text(m.kernel), json_text(m.json)});
  });
}

void ResultsStore::record_run(const RunRecord& run) {
  in_write_transaction(*db_, [&] {
    db_->query(
        "INSERT INTO runs (run_id, suite, jobs_file, started_at, finished_at, status, mlbench_version, "
        "mlbench_commit, command, outdir, label, machine) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET finished_at = excluded.finished_at, status = excluded.status",
        {text(run.run_id), text(run.suite), masked(run.jobs_file), text(run.started_at), text(run.finished_at),
         text(run.status), text(run.mlbench_version), text(run.mlbench_commit), masked(run.command), masked(run.outdir),
         masked(run.label), run.machine.empty() ? Value() : text(run.machine)});
  });
}

void ResultsStore::record_instance(const InstanceRecord& i) {
  const std::string key = instance_key(i.file);
  in_write_transaction(*db_, [&] {
    db_->query("DELETE FROM instances WHERE run_id = ? AND instance_key = ? AND file <> ?",
               {text(i.run_id), text(key), text(i.file)});
    db_->query(
        "INSERT INTO instances (run_id, file, instance_key, pass, slot, bench, job, failed, reason, items_per_s, "
        "stall_pct, wait_s, h2d_s, compute_s, fetch_ms_per_item, prep_ms_per_item, start_time, report_json) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, file) DO UPDATE SET "
        "failed = excluded.failed, reason = excluded.reason, items_per_s = excluded.items_per_s, "
        "stall_pct = excluded.stall_pct, wait_s = excluded.wait_s, h2d_s = excluded.h2d_s, "
        "compute_s = excluded.compute_s, fetch_ms_per_item = excluded.fetch_ms_per_item, "
        "prep_ms_per_item = excluded.prep_ms_per_item, report_json = excluded.report_json",
        {text(i.run_id), text(i.file), text(key), integer(i.pass), integer(i.slot), text(i.bench), text(i.job),
         integer(i.failed ? 1 : 0), masked(i.reason), number(i.items_per_s), number(i.stall_pct), number(i.wait_s),
         number(i.h2d_s), number(i.compute_s), number(i.fetch_ms_per_item), number(i.prep_ms_per_item),
         text(i.start_time), i.report.is_null() ? Value("") : json_text(i.report)});
  });
}

void ResultsStore::record_stall(const StallAnalysisRecord& a) {
  in_write_transaction(*db_, [&] {
    db_->query(
        "INSERT INTO stall_analyses (analysis_id, run_id, bench, machine, recorded_at, data, compute_pct, prep_pct, "
        "fetch_pct, items_per_s_cold, items_per_s_warm, verdict, recommendation, analysis_json) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (analysis_id) DO NOTHING",
        {text(a.analysis_id), a.run_id.empty() ? Value() : text(a.run_id), text(a.bench), text(a.machine),
         text(a.recorded_at), masked(a.data), number(a.compute_pct), number(a.prep_pct), number(a.fetch_pct),
         number(a.items_per_s_cold), number(a.items_per_s_warm), text(a.verdict), masked(a.recommendation),
         json_text(a.analysis)});
  });
}

bool ResultsStore::has_instance(const std::string& run_id, const std::string& file) {
  const auto rows = db_->query("SELECT count(*) FROM instances WHERE run_id = ? AND file = ?", {run_id, file});
  return !rows.empty() && to_int(rows[0][0]) > 0;
}

std::vector<RunRecord> ResultsStore::runs(const std::string& suite) {
  std::vector<RunRecord> out;
  for (const Row& r : db_->query(fmt::format("SELECT {} FROM runs r WHERE (? = '' OR r.suite = ?) "
                                             "ORDER BY r.started_at, r.run_id",
                                             kRunColumns),
                                 {suite, suite})) {
    out.push_back(run_from(r));
  }
  return out;
}

std::optional<RunRecord> ResultsStore::run(const std::string& run_id) {
  const auto rows = db_->query(fmt::format("SELECT {} FROM runs r WHERE r.run_id = ?", kRunColumns), {run_id});
  if (rows.empty()) return std::nullopt;
  return run_from(rows[0]);
}

std::vector<MachineRecord> ResultsStore::machines() {
  std::vector<MachineRecord> out;
  for (const Row& r :
       db_->query("SELECT fingerprint, kind, hostname, cpu_model, logical_cores, memory_bytes, gpu_model, gpu_count, "
                  "driver, blas, libtorch, cgroup_mode, kernel, machine_json FROM machines ORDER BY kind, hostname")) {
    MachineRecord m;
    m.fingerprint = str(r[0]);
    m.kind = str(r[1]);
    m.hostname = str(r[2]);
    m.cpu_model = str(r[3]);
    m.logical_cores = to_int(r[4]);
    m.memory_bytes = to_int(r[5]);
    m.gpu_model = str(r[6]);
    m.gpu_count = to_int(r[7]);
    m.driver = str(r[8]);
    m.blas = str(r[9]);
    m.libtorch = str(r[10]);
    m.cgroup_mode = str(r[11]);
    m.kernel = str(r[12]);
    m.json = to_json(r[13]);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<HistoryInstance> ResultsStore::instances(const InstanceQuery& q) {
  const std::string sql = fmt::format(
      "SELECT i.run_id, i.pass, i.slot, i.bench, i.job, i.file, i.failed, i.reason, i.items_per_s, i.stall_pct, "
      "i.wait_s, i.h2d_s, i.compute_s, i.fetch_ms_per_item, i.prep_ms_per_item, i.start_time, {}, {} "
      "FROM instances i JOIN runs r ON r.run_id = i.run_id "
      "WHERE (? = '' OR i.bench = ?) AND (? = '' OR r.machine = ?) AND (? = '' OR r.suite = ?) "
      "ORDER BY r.started_at, r.run_id, i.pass, i.bench, i.slot, i.file",
      kRunColumns, q.with_report ? "i.report_json" : "NULL");
  std::vector<HistoryInstance> out;
  for (const Row& r : db_->query(sql, {q.bench, q.bench, q.machine, q.machine, q.suite, q.suite})) {
    HistoryInstance h;
    InstanceRecord& i = h.instance;
    i.run_id = str(r[0]);
    i.pass = to_int(r[1]);
    i.slot = to_int(r[2]);
    i.bench = str(r[3]);
    i.job = str(r[4]);
    i.file = str(r[5]);
    i.failed = to_int(r[6]) != 0;
    i.reason = str(r[7]);
    i.items_per_s = to_number(r[8]);
    i.stall_pct = to_number(r[9]);
    i.wait_s = to_number(r[10]);
    i.h2d_s = to_number(r[11]);
    i.compute_s = to_number(r[12]);
    i.fetch_ms_per_item = to_number(r[13]);
    i.prep_ms_per_item = to_number(r[14]);
    i.start_time = str(r[15]);
    h.run = run_from(r, 16);
    i.report = to_json(r[28]);
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<StallAnalysisRecord> ResultsStore::stall_analyses(const std::string& bench) {
  std::vector<StallAnalysisRecord> out;
  for (const Row& r :
       db_->query("SELECT analysis_id, run_id, bench, machine, recorded_at, data, compute_pct, prep_pct, fetch_pct, "
                  "items_per_s_cold, items_per_s_warm, verdict, recommendation, analysis_json FROM stall_analyses "
                  "WHERE (? = '' OR bench = ?) ORDER BY recorded_at, analysis_id",
                  {bench, bench})) {
    StallAnalysisRecord a;
    a.analysis_id = str(r[0]);
    a.run_id = str(r[1]);
    a.bench = str(r[2]);
    a.machine = str(r[3]);
    a.recorded_at = str(r[4]);
    a.data = str(r[5]);
    a.compute_pct = to_number(r[6]).value_or(0);
    a.prep_pct = to_number(r[7]).value_or(0);
    a.fetch_pct = to_number(r[8]).value_or(0);
    a.items_per_s_cold = to_number(r[9]);
    a.items_per_s_warm = to_number(r[10]);
    a.verdict = str(r[11]);
    a.recommendation = str(r[12]);
    a.analysis = to_json(r[13]);
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace mlbench::store
