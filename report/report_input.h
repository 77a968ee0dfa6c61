// From what --reports names (a tree of runs, one run directory or one report
// file) to the Report every reporter prints, with the one-line notes a user
// needs to read it: which statistics need repeated passes, which runs from
// different machines were grouped. Shared by mlbench-report and mlbench-run's
// end-of-run report.html.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/instance_report.h"
#include "report/report_model.h"
#include "report/reports_tree.h"

namespace mlbench::report {

// The suites of the instance reports under `reports` (a tree, a run directory or a
// file), sorted; for a missing --name.
std::vector<std::string> suites_in(const std::filesystem::path& reports);

// "" for `runs` >= 4 (the Mila rules); else one line saying which statistics need
// repeated passes: sd and sd% need at least 2 runs, the Mila rules compare on 4.
std::string repeated_passes_note(int runs);

// One machine per run: {run, "host (model)"}. "" when all runs come from one machine,
// else the one line naming which runs of which machine were grouped.
std::string machines_note(const std::vector<std::pair<std::string, std::string>>& run_machines);

// The machine a run directory's reports came from: machine.json's hostname and GPU
// (else CPU) model, else the first report's hostname and gpu fields; "" when unknown.
std::string run_machine(const std::filesystem::path& run_dir);

// The machine of a run directory (or of the first run of a tree, or of a report file): its
// machine.json, else its first report's machine block; nullopt when neither says.
std::optional<core::MachineInfo> reports_machine(const std::filesystem::path& reports);

// The targets of this machine's kind: without GPUs, the CPU targets made on this CPU model with
// this many logical cores (targets.h, cpu_targets_mismatch); else the GPU model (by name or by
// one word of it, e.g. "RTX" in "NVIDIA GeForce RTX 3090"). nullopt when `dirs` hold none for
// it, with `why_none` (when given) the line to print instead: "no target for this CPU (AMD EPYC
// x2); targets exist for: ...".
std::optional<Targets> targets_for_machine(const core::MachineInfo& machine,
                                           const std::vector<std::filesystem::path>& dirs,
                                           std::string* why_none = nullptr);
// The same for this machine (core/sysinfo.h's CPU model and cores) with these GPUs.
std::optional<Targets> targets_for_machine(const std::vector<std::string>& gpu_names,
                                           const std::vector<std::filesystem::path>& dirs,
                                           std::string* why_none = nullptr);

struct ReportRequest {
  std::filesystem::path reports;
  std::string suite;
  Targets targets;
  int min_runs = 4;                               // for a tree; one run directory or file is one run, and says so
  std::vector<std::filesystem::path> stall_dirs;  // searched besides `reports`
};

// Loads, analyses and summarizes (with the BLAS warnings of report/blas_notes.h);
// throws InputError. `tree`, when given, receives the reports as loaded.
Report load_report(const ReportRequest& request, ReportsTree* tree = nullptr);

}  // namespace mlbench::report
