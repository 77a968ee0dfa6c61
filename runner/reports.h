// The runner's side of the instance reports: finding the report an instance
// wrote, adding the `resources`/`isolation`/`runner` blocks, turning it into a
// `.FAIL.` report, writing one when the instance left none, and (--resume)
// finding instances that already completed. All writes are atomic.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/instance_report.h"
#include "outcome.h"
#include "plan.h"

namespace mlbench::runner {

// Report files in `dir` whose names start with `prefix` and end in ".json".
std::set<std::filesystem::path> list_reports(const std::filesystem::path& dir, const std::string& prefix);

// A completed (non-FAIL, `completed: true`) report of this instance and sweep point that
// the runner finished (it has the runner block), if any.
std::optional<std::filesystem::path> completed_report(const std::filesystem::path& dir, const Instance& inst);

// Moves this instance's earlier FAIL reports, and reports the runner never finished
// (same sweep point), into dir/superseded/,
// so a rerun leaves one report per instance. Returns how many moved.
int supersede_failures(const std::filesystem::path& dir, const Instance& inst);

// What the runner adds to an instance's report: how it ran it.
struct RunnerBlocks {
  std::string isolation;
  core::RunnerInfo runner;
  std::optional<core::ResourcesInfo> resources;        // when it ran
  std::optional<core::InterferenceInfo> interference;  // when sampled
};

// An instance's final report: its file and the record written to it.
struct FinalReport {
  std::filesystem::path file;
  core::InstanceReport report;
};

// Writes the final report of an ended instance and returns it. `written`: the report the
// instance wrote itself (nullopt: none; one the reader refuses is kept as written under
// `base`'s fields, its outcome a failure already); `base`: the report the runner writes itself.
FinalReport finalize_report(const std::filesystem::path& dir, const Instance& inst,
                            const std::optional<std::filesystem::path>& written, const Outcome& outcome,
                            const RunnerBlocks& blocks, core::InstanceReport base);

// Whether a report belongs to this sweep point (reports the runner has not touched count as
// point 0 of a job without a sweep).
bool same_point(const core::InstanceReport& r, const Instance& inst);

// Reads a report; nullopt when missing or not a JSON object.
std::optional<nlohmann::json> read_report(const std::filesystem::path& file);
// The same, typed (core/instance_report.h); a report of the wrong shape reads as not completed,
// its reason the reader's error naming the field.
std::optional<core::InstanceReport> read_instance_report(const std::filesystem::path& file);

}  // namespace mlbench::runner
