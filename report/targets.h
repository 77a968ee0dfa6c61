// Per machine-model targets (configs/targets/<model>.json): what each benchmark
// should reach on that GPU (or CPU) model, and the per-bench thresholds of the
// milabench-style score.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report_model.h"

namespace mlbench::report {

// {"model": "RTX", "note": "...", "benchmarks": {"bench": 1200, "other": {"target": 50,
// "perf_target": 0.5, "sd_target": 5}}}. Throws InputError naming `source` and the field.
Targets parse_targets(const nlohmann::json& j, const std::string& source);
Targets load_targets_file(const std::filesystem::path& file);

// The targets file for a model, case-insensitive: `<dir>/<model>.json` by file
// name, or a file whose "model" field equals it, in the first directory that has
// one. Throws InputError listing the models available.
std::filesystem::path find_targets_file(const std::string& model, const std::vector<std::filesystem::path>& dirs);

// Where --gpu-model looks: ./configs/targets, then the targets/ of the configs the running
// command finds (core/layout.h: installed, or the source tree of its build).
std::vector<std::filesystem::path> default_target_dirs();

// x rounded down to 2 significant digits (4 683 000 -> 4 600 000, 9.07 -> 9): the
// targets method of docs/report.md, so that a run as fast as the measured ones passes.
double round_down_2_significant(double x);

// A targets file (the format parse_targets reads) from a report's rows: per benchmark the
// median of its run values (items/s), rounded down to 2 significant digits. Benchmarks with
// no run value are left out and named in `skipped`.
nlohmann::json make_targets(const std::vector<BenchResult>& benches, const std::string& model, const std::string& note,
                            std::vector<std::string>& skipped);

// One warning per benchmark of `targets` (make_targets' file) whose instances failed: a target
// made from the few that passed (3 of 4 failed, say) is weak evidence to hold runs to.
std::vector<std::string> targets_from_failing_benches(const std::vector<BenchResult>& benches,
                                                      const nlohmann::json& targets);

}  // namespace mlbench::report
