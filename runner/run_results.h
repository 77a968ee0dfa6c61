// The end of a run (also after Ctrl-C): reads the final instance reports of every
// pass into the results table, writes report.html into the run directory with
// mlbench-report's renderer, and prints the table and the paths of report.html
// and summary.txt.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "report/report_model.h"
#include "results_table.h"
#include "scheduler.h"

namespace mlbench::runner {

// One row per step of the plan (same steps in every pass), over every pass's instances;
// `targets`: this machine kind's, if any.
std::vector<ResultRow> collect_results(const std::vector<Pass>& passes, const std::optional<report::Targets>& targets,
                                       const std::map<std::string, std::string>& failed = {});

struct RunEnd {
  std::filesystem::path outdir;  // the run directory (R<k>/ below it with --repeat-suite)
  std::string suite;
  std::optional<report::Targets> targets;
  std::string no_targets_why;  // without targets: why ("no target for this CPU (...); targets exist for: ...")
  bool color = false;          // on a terminal, NO_COLOR unset
  // Instances this run saw fail (Scheduler::failed_instances): failed in the table whatever
  // their reports on disk say.
  std::map<std::string, std::string> failed;
  // The run directories whose summary.txt was written whole (Scheduler::finished_summaries):
  // a summary.txt that holds only its first lines (a full disk) is not named as a result.
  std::set<std::filesystem::path> finished_summaries;
};

// Prints the table, writes outdir/report.html and prints where it and summary.txt are.
// Returns false when report.html could not be written (the line says why).
bool report_results(Output& output, const std::vector<Pass>& passes, const RunEnd& end);

}  // namespace mlbench::runner
