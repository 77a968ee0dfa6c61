// mlbench-report's views of the results store (docs/report.md, "The results store"), as
// plain functions over the records the store returns (no I/O, no clock), so that a unit
// test can feed hand-made records in:
//  - the history: per benchmark and machine, its runs in time order, each run's change
//    against the runs before it on that machine (Mann-Whitney over the passes, or by
//    size when too few passes for the test) and where its time went (compute, fetch,
//    prep per item);
//  - the machines: per benchmark, the latest run on each machine side by side.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/report_model.h"
#include "store/results_store.h"

namespace mlbench::report {

// A flag by size (too few passes for the test): the change must be beyond this fraction
// of the earlier passes' mean, and outside their range.
inline constexpr double kBySizeThreshold = 0.05;

// Where one item's time went, ms per item: compute, fetch and prep (the wait split in
// proportion to the pipeline's fetch and prep busy time per item, or an analysis's split).
struct TimePerItem {
  double compute_ms = kNaN, fetch_ms = kNaN, prep_ms = kNaN;
  double wait_ms = 0.0;  // wait that no pipeline stage splits (a report without fetch/prep stages)
  // "mlbench-stall" (an analysis of that benchmark and machine), "reports" (the instances'
  // wait/h2d/compute and pipeline stages) or "" (no timing recorded).
  std::string source;
  std::string analysis_id;  // the analysis whose split it is ("" from the reports)
  double total_ms() const { return compute_ms + fetch_ms + prep_ms + wait_ms; }
};

// A run against the runs before it on the same machine.
struct HistoryChange {
  std::string verdict;       // "regression", "improvement", "no change"
  double change_pct = kNaN;  // this run's mean over the earlier passes' mean, minus 1, in percent
  std::string method;        // "mann-whitney" (both sides have enough passes) or "by size"
  double p_value = kNaN;     // Mann-Whitney's two-sided p (NaN by size)
  int passes = 0, earlier_passes = 0;
  // The component (compute, fetch, prep, "data wait") whose ms/item grew most (a regression) or shrank
  // most (an improvement), against the mean of the earlier runs timed the same way (reports, or
  // analyses); "" when not flagged, untimed, or when every side's split is one analysis's (a
  // split applied to both sides cannot say where the time moved).
  std::string component;
  double component_delta_ms = kNaN, total_delta_ms = kNaN;
  std::string text;  // "regression -23.4% (p 0.008); its time moved into prep (+0.41 ms/item of +0.52)"
};

// One run of one benchmark on one machine.
struct HistoryRun {
  std::string run_id, when;         // when: the run's started_at (ISO 8601 UTC)
  std::vector<double> pass_values;  // per pass: mean items/s of its non-failed instances, pass order
  double items_per_s = kNaN;        // mean of the pass values
  double sd_pct = kNaN;             // sample sd of the pass values over their mean, percent (>= 2 passes)
  double min_pass = kNaN, max_pass = kNaN;
  double stall_pct = kNaN;  // mean over the non-failed instances
  int instances = 0, failures = 0;
  std::vector<std::string> failure_reasons;  // "pass 1 slot 0: NaN in batch_loss"
  TimePerItem time;
  std::optional<HistoryChange> change;  // every run after the first
};

struct HistorySeries {
  std::string bench;
  std::string machine;           // fingerprint
  std::string machine_label;     // "<kind> / <hostname>"
  std::vector<HistoryRun> runs;  // time order
};

struct History {
  std::string store;
  std::string bench;                  // the --history BENCH asked for ("" = every benchmark)
  std::vector<HistorySeries> series;  // by benchmark, then machine label
};

// The history of `instances` (the store's instances with their runs); `machines` label the
// series; `analyses` give the time split where one of that benchmark and machine exists.
History build_history(const std::vector<store::HistoryInstance>& instances,
                      const std::vector<store::MachineRecord>& machines,
                      const std::vector<store::StallAnalysisRecord>& analyses);

// One run against the pass values of the runs before it (the regression rule of
// docs/report.md, "The results store"); `time` and `earlier_time` name the component.
HistoryChange compare_with_earlier(const std::vector<double>& passes, const std::vector<double>& earlier_passes,
                                   const TimePerItem& time, const std::vector<TimePerItem>& earlier_time);

// ms per item from per-iteration seconds and the pipeline's fetch/prep ms per item; an
// analysis's split (percent) replaces the per-iteration split when given.
TimePerItem time_per_item(double items_per_s, double wait_s, double h2d_s, double compute_s, double fetch_ms_per_item,
                          double prep_ms_per_item, const store::StallAnalysisRecord* analysis);

// --machines: per benchmark, the latest run of each machine.
struct MachineColumn {
  std::string fingerprint, label;  // label: "<kind> / <hostname>"
  std::string kind, hostname;
};
struct MachineCell {
  std::string run_id, when;
  double items_per_s = kNaN;  // mean of the run's pass values
  double relative = kNaN;     // items/s over the best machine's for this benchmark
  double stall_pct = kNaN;
  int passes = 0, failures = 0;
  std::string verdict;  // the latest stall analysis's verdict of this benchmark and machine ("" when none)
};
struct MachinesRow {
  std::string bench;
  std::map<std::string, MachineCell> cells;  // by machine fingerprint; a machine without this bench has none
};
struct MachinesView {
  std::string store;
  std::vector<MachineColumn> machines;  // the machines with at least one instance, by label
  std::vector<MachinesRow> rows;        // by benchmark
};

MachinesView build_machines_view(const std::vector<store::HistoryInstance>& instances,
                                 const std::vector<store::MachineRecord>& machines,
                                 const std::vector<store::StallAnalysisRecord>& analyses);

// "<kind> / <hostname>", or the fingerprint when the store does not know the machine.
std::string machine_label(const std::string& fingerprint, const std::vector<store::MachineRecord>& machines);

// "+0.41 ms/item" (or µs/item below 0.01 ms), with the sign when `sign`.
std::string format_ms_per_item(double ms, bool sign);

}  // namespace mlbench::report
