// mlbench-stall's result, stall.json, as a typed record (docs/report-format.md, "mlbench-stall's
// stall.json"; its JSON Schema: docs/schema/stall.schema.json): the parts that other tools read
// (mlbench-report's stall columns and charts, --reanalyze). A field of the wrong type is one
// ReportFormatError naming it; results of every older schema_version read, their missing blocks
// absent.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/instance_report.h"

namespace mlbench::core {

// The schema_version mlbench-stall writes now (docs/report-format.md lists what each added).
inline constexpr int kStallSchema = 14;

// Where the cold epoch's time went, in percent of it.
struct StallSplit {
  double compute_pct = 0, prep_pct = 0, fetch_pct = 0;
};

// The measured rates, samples/s (G ingestion, P prep, F_obs cold, C fetch from memory,
// S fetch from storage).
struct StallRates {
  std::optional<double> G, P, F_obs, C, S;
  std::optional<double> S_model;  // S as the what-if used it
  nlohmann::json raw;             // the block as written (S_model, unit), for exports that pass it on
};

// The what-if's self-check (absent in results before it).
struct StallSelfCheck {
  bool passed = false;
  std::optional<double> max_error_pct, threshold_pct;
  std::string text, cause;
  nlohmann::json raw;  // the block as written (its points), for exports that pass it on
};

// What the analysis told its user to act on (schema 13; older ones have some of it).
struct StallRecommendation {
  std::string bound, verdict, remedy_text, cache;
  std::vector<std::string> advice;
  std::optional<double> cache_fraction, predicted, page_cache_fraction, knee_fraction, plateau_share;
  std::optional<std::pair<double, double>> predicted_range;
  std::optional<std::int64_t> cores;
  bool withheld = false;
};

// noise_pp: how far each share of the split could move with its rates' noise, in points.
struct StallNoise {
  double compute = 0, prep = 0, fetch = 0;
};

// findings.fetch / findings.prep: whether the share is a stall, and what the console says when not.
struct StallFinding {
  std::optional<bool> claimed;
  std::string text;
};

// direct: the cold run's own instrumentation beside the differential split.
struct StallDirect {
  std::optional<double> stall_pct_cold, differential_stall_pct, disagreement_pp;
  std::string note;
};

// whatif.uncertainty: the rates' relative uncertainty behind each prediction's range.
struct StallUncertainty {
  double G = 0, P = 0, F_obs = 0, S = 0;
  std::string from;
};

// whatif.read_ahead and whatif.serial: the loader models and how they predict the cold run.
struct StallLoaderModel {
  std::optional<std::int64_t> window;  // read_ahead: reads ahead per worker
  std::optional<double> prep_us, storage_us, miss_us, page_hit_us, predicted_cold, cold_error_pct;
};

// whatif.coordinated: K jobs sharing one prep (docs/stall.md, "Coordinated prep").
struct StallCoordinatedPrediction {
  std::int64_t jobs = 0;
  double uncoordinated = 0, coordinated = 0, gain = 0;
  std::optional<double> device_per_job, step_cpu_extra_us;
  std::string device_per_job_from;
  std::optional<std::string> step_cpu_extra_from;
};
struct StallCoordinated {
  std::vector<StallCoordinatedPrediction> predictions;
  std::string prep_cpu_from = "cpus-1";
  double prep_cpu_us = 0, host_compute_cpu_us = 0;
  std::int64_t devices = 0;
};

// whatif.partitioned: N nodes caching a share each (docs/stall.md, "Partitioned cache").
struct StallPartitionedPrediction {
  std::int64_t nodes = 0;
  double memory_fraction = 0, own = 0, partitioned = 0, gain = 0;
  std::optional<std::pair<double, double>> range;  // partitioned_range: over the pairs of runs
  double peer_requests_per_sample = 0;
};
struct StallPeerCpu {
  std::string source, note;  // source "nodes": measured beside decoding; else back to back
  double used_us = 0;
  std::int64_t nodes = 0;
  std::vector<double> pairs_us, pairs_local_us;  // pairs_local_cpu_per_item_us
};
struct StallPartitioned {
  std::vector<StallPartitionedPrediction> predictions;
  std::optional<StallPeerCpu> peer_cpu;
  std::string prep_cpu_from;
  std::optional<double> prep_cpu_us, batch_items;
};

// The dataset's residency in the page cache around a run.
struct StallResidency {
  std::uint64_t files = 0, pages = 0, resident_pages = 0;
};

// One run of the analysis (runs.<label>), as --reanalyze models it again.
struct StallRun {
  std::string report;  // the run's report file ("" for --exec's direct reads)
  std::optional<double> rate, wall_s;
  bool nodes = false;  // a run of several processes (its reports are per node)
  bool held_in_memory = false;
  std::optional<StallResidency> residency_before, residency_after;
  std::string pipeline_source;  // pipeline.source ("" when none)
};

// storage: the raw reads of the dataset and the loopback peer measurement.
struct StallStorage {
  std::optional<double> mean_file_bytes, seq_cold_MBps, rand_cold_MBps, cached_MBps, peer_rate, peer_cpu_us;
  std::optional<std::int64_t> peer_ids_per_request;
};

// A point of the what-if's item-cache curve (whatif.curve) or a measured one (whatif.measured,
// whatif.page_cache.measured: with the prediction's range and its error).
struct StallCurvePoint {
  double x = 0;
  std::optional<double> fetch, predicted, measured, lo, hi, error_pct;
};

// whatif: the model, its curve, the points measured against it and the remedies' models.
struct StallWhatIf {
  std::optional<std::string> model;  // absent in results before the field (the overlap model)
  std::string model_formula, cache;
  std::optional<double> exposed_fetch_us;
  std::vector<StallCurvePoint> curve, measured, page_measured;
  std::optional<StallUncertainty> uncertainty;
  std::optional<StallLoaderModel> read_ahead, serial;
  std::optional<StallCoordinated> coordinated;
  std::optional<StallPartitioned> partitioned;
};

struct StallRecord {
  int schema_version = 1;  // results before the field: 1
  std::string bench, data;
  std::optional<std::int64_t> items, batch_size, cores, iterations;
  std::optional<StallStorage> storage;
  std::map<std::string, StallRun> runs;                    // by label
  std::map<std::string, std::vector<double>> round_rates;  // rounds.runs.<label>.rates (--rounds)
  std::map<std::string, double> round_spread_pct;          // rounds.runs.<label>.spread_pct
  std::optional<std::int64_t> rounds_count;                // rounds.count
  nlohmann::json rounds, exec;                             // as written (null when absent), carried on
  std::optional<std::int64_t> reanalysis_of;               // reanalysis.schema_version: the result modelled again
  StallSplit split;
  std::optional<StallNoise> noise;                          // noise_pp
  std::optional<StallFinding> fetch_finding, prep_finding;  // findings.fetch, findings.prep
  std::optional<StallDirect> direct;
  std::map<std::string, double> prep_by_cores;  // P(N) by CPU count, as the sweep measured it
  std::optional<StallWhatIf> whatif;
  std::vector<std::string> warnings;
  std::optional<StallRates> rates;
  std::optional<StallSelfCheck> self_check;
  std::optional<StallRecommendation> recommendation;
  nlohmann::json raw;  // stall.json as read
};

// The record in `j`: `bench` (a string) and `split` (its three numbers) are required. Throws
// ReportFormatError naming the field; a schema_version newer than kStallSchema is refused.
StallRecord parse_stall_record(const nlohmann::json& j);

}  // namespace mlbench::core
