// Per machine-model targets (configs/targets/<model>.json): what each benchmark
// should reach on that GPU (or CPU) model, and the per-bench thresholds of the
// milabench-style score.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/instance_report.h"
#include "report/report_model.h"

namespace mlbench::report {

// {"model": "RTX", "note": "...", ("cpu_model": "AMD EPYC 7B13", "logical_cores": 2 for "CPU"), "benchmarks": {"bench":
// 1200, "other": {"target": 50, "perf_target": 0.5, "sd_target": 5}}}. Throws InputError naming `source` and the field.
Targets parse_targets(const nlohmann::json& j, const std::string& source);
Targets load_targets_file(const std::filesystem::path& file);

// The targets file for a model, case-insensitive: `<dir>/<model>.json` by file
// name, or a file whose "model" field equals it, in the first directory that has
// one. Throws InputError listing the models available.
std::filesystem::path find_targets_file(const std::string& model, const std::vector<std::filesystem::path>& dirs);

// Where --gpu-model looks: ./configs/targets, then the targets/ of the configs the running
// command finds (core/layout.h: installed, or the source tree of its build).
std::vector<std::filesystem::path> default_target_dirs();

// Whether `t` are CPU targets: model "CPU" (any case) or a cpu_model.
bool is_cpu_targets(const Targets& t);
// "CPU: AMD EPYC 7B13 x2" (as the results store names machine kinds), "CPU of unknown model" for a
// CPU file made before the fields, else the model ("RTX").
std::string targets_kind(const Targets& t);
// Where `targets` (a CPU file) were made: writes "cpu_model" and "logical_cores".
void set_targets_machine(nlohmann::json& targets, const std::string& cpu_model, std::int64_t logical_cores);

// Whether CPU targets fit a CPU machine: nullopt when they do (same model, case and spaces aside,
// and core count) or when the targets are not CPU targets; else the one line a report prints
// instead of comparing: "no target for this CPU (AMD EPYC x2); targets exist for: <available>".
// A CPU file without cpu_model fits no machine by itself (its kind is unknown).
std::optional<std::string> cpu_targets_mismatch(const Targets& t, const std::string& cpu_model,
                                                std::int64_t logical_cores, const std::string& available);

// "AMD EPYC 7B13 x2 (cpu.json), RTX (rtx.json)": what the targets files in `dirs` were made for,
// from the first folder that holds any.
std::string available_targets(const std::vector<std::filesystem::path>& dirs);

// The targets files (*.json) of the first of `dirs` that has any, sorted; empty when none has.
std::vector<std::filesystem::path> targets_files(const std::vector<std::filesystem::path>& dirs);

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
