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
#include <vector>

#include <nlohmann/json.hpp>

#include "core/instance_report.h"

namespace mlbench::core {

// The schema_version mlbench-stall writes now (docs/report-format.md lists what each added).
inline constexpr int kStallSchema = 13;

// Where the cold epoch's time went, in percent of it.
struct StallSplit {
  double compute_pct = 0, prep_pct = 0, fetch_pct = 0;
};

// The measured rates, samples/s (G ingestion, P prep, F_obs cold, C fetch from memory,
// S fetch from storage).
struct StallRates {
  std::optional<double> G, P, F_obs, C, S;
  nlohmann::json raw;  // the block as written (S_model, unit), for exports that pass it on
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
  std::optional<double> cache_fraction, predicted;
  std::optional<std::int64_t> cores;
  bool withheld = false;
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

// A point of the what-if's item-cache curve (whatif.curve) or a measured one (whatif.measured).
struct StallCurvePoint {
  double x = 0;
  std::optional<double> fetch, predicted, measured;
};

struct StallRecord {
  int schema_version = 1;  // results before the field: 1
  std::string bench, data;
  std::optional<std::int64_t> items, batch_size, cores, iterations;
  std::optional<StallStorage> storage;
  std::map<std::string, StallRun> runs;                    // by label
  std::map<std::string, std::vector<double>> round_rates;  // rounds.runs.<label>.rates (--rounds)
  nlohmann::json rounds, exec;                             // as written (null when absent), carried on
  std::vector<StallCurvePoint> curve, measured;            // whatif.curve, whatif.measured
  std::optional<std::int64_t> reanalysis_of;               // reanalysis.schema_version: the result modelled again
  StallSplit split;
  std::optional<StallRates> rates;
  std::optional<StallSelfCheck> self_check;
  std::optional<StallRecommendation> recommendation;
  nlohmann::json raw;  // stall.json as read
};

// The record in `j`: `bench` (a string) and `split` (its three numbers) are required. Throws
// ReportFormatError naming the field; a schema_version newer than kStallSchema is refused.
StallRecord parse_stall_record(const nlohmann::json& j);

}  // namespace mlbench::core
