// The instance report of Contract 1 as one typed record (docs/report-format.md; its JSON Schema:
// docs/schema/instance-report.schema.json). Every reader (mlbench-report, mlbench-run, mlbench-stall)
// reads reports through read_instance_report(), which turns a bad or old report into one error
// naming the file and the field; every C++ writer (the benchmarks' BenchmarkRun, mlbench-run, the
// --exec probe's C++ side) fills one and writes it with to_json(). The blocks that a benchmark
// writes in its own shape (pipeline, gpu_monitor's samples, metrics, args) are kept as written.
//
// Versions: `schema_version` is written by every writer from kInstanceReportSchema on; a report
// without it is version 0 (every report written before the field) and reads the same way, a
// block it lacks being absent (std::nullopt). A report of a newer version than this binary
// knows is refused with one line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlbench::core {

// 1: the first versioned report (the fields of docs/report-format.md, "Fields").
inline constexpr int kInstanceReportSchema = 1;

// A report that is not JSON, not an object, of a newer version, or with a field of the wrong type.
// what(): "FILE: train_item.avg is "fast" (not a number)" (no "FILE: " when parsed from memory).
class ReportFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// {"avg", "min", "max", "sd", "count", "unit"}: null figures when nothing was kept.
struct Stats {
  std::optional<double> avg, min, max, sd;
  std::int64_t count = 0;
  std::string unit;
};

// train_item: items/s of the kept observations.
struct TrainItem {
  std::optional<double> avg, min, max, range;
  std::string unit;
  bool avg_written = false;  // `avg` is in the block (null or a number): "null" is not "missing"
};

// stall: per-iteration phases of the kept observations.
struct StallPhases {
  std::optional<Stats> wait, h2d, compute, iteration;
  std::optional<double> stall_pct;
  std::int64_t warmup_iterations = 0;
  std::string phase_clock;  // "host" or "device"; "" in reports before the field
};

// machine.blas: the BLAS the process loaded.
struct BlasBlock {
  std::string name, library, backend;
  std::int64_t threads = 0;
};

struct MachineInfo {
  std::string hostname, cpu_model, kernel, cgroup_mode, affinity, framework, framework_version;
  std::int64_t logical_cores = 0, physical_cores = 0, memory_bytes = 0;
  std::vector<std::string> gpus;
  bool cuda_available = false;
  std::optional<BlasBlock> blas;  // absent in reports before the field
};

// process_cpu: the process's CPU time over the kept observations.
struct ProcessCpuBlock {
  std::optional<double> user_s, sys_s, wall_s, busy_cpus, per_item_us;
  std::optional<double> host_busy_cpus;  // the machine's busy CPUs meanwhile; absent in older reports
};

// stability: the spread of the kept train observations (docs/report-format.md, "Stability").
struct StabilityInfo {
  std::int64_t observations = 0;
  std::optional<double> sd_pct, min_s, max_s, median_s, trend_pct, rho;
  bool warmup_trending = false, short_observations = false;
};

// calibration: only under --min-time.
struct CalibrationInfo {
  std::int64_t number = 0, probe_iterations = 0, refinements = 0;
  std::optional<double> seconds_per_iteration, target_s;
};

// interference: what else ran on the slot's CPUs (mlbench-run; docs/runner.md, "Interference").
struct InterferenceInfo {
  std::optional<double> other_cpu_pct, other_cpu_s, own_cpu_s, steal_pct, wall_s, loadavg_start, loadavg_end;
  std::optional<double> probe_before_s, probe_after_s, probe_drift_pct, parallel_probe_before_s, parallel_probe_after_s;
  std::optional<double> probe_before_wall_s, probe_after_wall_s;
  std::vector<std::int64_t> slot_cpus;
};

// resources: the instance's cgroup counters (mlbench-run); every number null under Slurm.
struct ResourcesInfo {
  std::string source;  // "cgroup", "slurm"; "" in reports before the field
  std::optional<double> cpu_seconds;
  std::optional<std::int64_t> memory_peak_bytes, bytes_read, oom_kills;
};

// runner: how mlbench-run ran the instance (docs/runner.md).
struct RunnerInfo {
  std::string command, cpus, job, log, sweep;
  std::optional<std::int64_t> exit_code, signal, memory_limit_bytes;
  std::int64_t slot = 0;
  std::optional<std::int64_t> point;  // the sweep point; absent in reports before sweeps
  std::optional<double> wall_seconds;
  std::optional<std::string> slurm_state;  // under Slurm: the job step's state
  std::optional<std::string> run_id;       // mlbench-run's run ("<UTC timestamp>-<pid>"); absent in older reports
};

// gpu_monitor.summary's utilisation (docs/report-format.md, "GPU monitor"); the whole block (its
// samples) in `raw`, which is what is written.
struct GpuMonitorInfo {
  double interval_s = 0;
  std::string device;
  std::optional<double> util_pct_mean, util_pct_max;
  nlohmann::json raw;
};

// One stage of the data pipeline (pipeline.stages.<name>).
struct StageTotals {
  std::optional<double> busy_s, per_item_ms;
  std::int64_t items = 0;
};

// pipeline.partitioned_cache's counters that the partitioned what-if reads (docs/pipeline.md).
struct PartitionedCacheInfo {
  std::int64_t max_ids_per_request = 0;
  std::optional<double> peer_requests;  // requests sent to peers
  double peer_items = 0;                // items asked of peers: cache_items + storage_items + misses
};

// pipeline: the loader's totals that readers need typed; the whole block in PipelineInfo::raw, which
// is what is written.
struct PipelineInfo {
  std::string source, root, output;  // output: "float32" or "uint8" batches
  std::map<std::string, StageTotals> stages;
  std::optional<std::int64_t> bytes_read, corrupt_samples, workers, prefetch, image_size;
  std::optional<double> consumer_wait_total_s;
  std::int64_t io_depth = 0;                      // absent in older reports: 0, they had no read-ahead
  std::optional<std::int64_t> read_ahead_window;  // read_ahead.window_per_worker
  std::optional<double> read_ahead_per_read_ms;   // read_ahead.per_read_ms: a read's mean latency
  std::optional<double> read_ahead_cpu_per_read_us;  // read_ahead.cpu_per_read_us: an I/O thread's CPU in a read
  // read_ahead.queue_wait_ms, item_wait_ms, wake_ms, takes_waited: a read's cycle beside the read.
  std::optional<double> read_ahead_queue_wait_ms, read_ahead_item_wait_ms, read_ahead_wake_ms, read_ahead_takes_waited;
  // source_detail of a source over HTTP: its requests, and the CPU time of the thread that ran them.
  std::optional<double> source_requests, source_transfer_cpu_s;
  std::optional<double> cache_items;              // cache.items: what the item cache held at the end
  std::optional<bool> pin_memory;
  std::vector<double> epoch_images;         // epochs[].images (the image loader)
  std::vector<double> epoch_rates;          // epochs[].images_per_s, where every epoch has it
  std::optional<std::int64_t> epoch_count;  // epochs as a count (the in-memory sources: sequences, tables)
  // The image loader writes `partitioned_cache` (null when off) and stallsim `emulated_storage`:
  // whether the block is in the report says which loader it was.
  bool has_partitioned_cache_field = false, emulated_storage = false;
  std::optional<PartitionedCacheInfo> partitioned_cache;
  nlohmann::json raw;
};

struct VersionInfo {
  std::string mlbench, git, source;
};

struct InstanceReport {
  int schema_version = 0;  // 0: a report written before the field
  std::string name, suite, vcd, hostname, device, unique_id, isolation;
  std::int64_t run_id = 0;
  std::optional<std::int64_t> jr_id;  // the slot; absent in reports before the field
  std::optional<std::int64_t> batch_size, workers, cpu_cores, repeat, number, seed, warmup, iterations;
  std::optional<double> min_time;
  std::optional<std::string> gpu;
  std::optional<VersionInfo> version;
  std::optional<MachineInfo> machine;
  nlohmann::json args;  // every flag by long name (benchmark-specific; no fixed type)
  std::vector<std::optional<double>> batch_loss, epoch_loss;  // nullopt: a non-finite loss
  std::map<std::string, nlohmann::json> metrics;              // benchmark-specific extras
  std::optional<Stats> train;
  std::optional<TrainItem> train_item;
  std::optional<StallPhases> stall;
  std::optional<ProcessCpuBlock> process_cpu;
  std::optional<PipelineInfo> pipeline;
  std::optional<StabilityInfo> stability;
  std::optional<CalibrationInfo> calibration;
  std::optional<InterferenceInfo> interference;
  std::optional<ResourcesInfo> resources;
  std::optional<RunnerInfo> runner;
  std::optional<GpuMonitorInfo> gpu_monitor;
  bool completed = false;
  std::string reason;            // why it did not complete ("" when completed)
  std::string benchmark_reason;  // mlbench-run's FAIL record: the benchmark's own reason, when it differs
  std::string start_time, end_time;
  // The report as read, or a writer's skeleton (the fields it writes as null until filled):
  // to_json() writes the typed fields over it, so that what they do not name (another writer's
  // block, a field of a newer minor change) is kept.
  nlohmann::json raw;

  // metrics.<key> as a number, when it is one.
  std::optional<double> metric(const std::string& key) const;
};

// The report as JSON: every typed field over `raw`. A field or block that is unset (nullopt, an
// empty string or list) is left as `raw` has it (null, absent, or a block kept as written);
// inside a typed block every field is written, null when unset, as the benchmarks write them.
// `reason` and `benchmark_reason` are written only when set. For a report read with
// parse_instance_report, to_json(parse_instance_report(j)) holds every field of j with its value.
nlohmann::json to_json(const InstanceReport& r);
nlohmann::json to_json(const MachineInfo& m);

// The report in `j`; throws ReportFormatError naming the field.
InstanceReport parse_instance_report(const nlohmann::json& j);
// The report in `file`; throws ReportFormatError naming the file and the field.
InstanceReport read_instance_report(const std::filesystem::path& file);
// A machine block: the report's `machine`, or a run directory's machine.json (mlbench-run), whose
// fields are the same (docs/runner.md); throws ReportFormatError naming the field.
MachineInfo parse_machine_info(const nlohmann::json& j);

// What a reader of a folder of JSON files asks before it reads one as a report: its suite and
// name, when `j` is an object with both as strings (else nullopt: not an instance report).
struct ReportIdentity {
  std::string suite, name;
};
std::optional<ReportIdentity> report_identity(const nlohmann::json& j);

}  // namespace mlbench::core
