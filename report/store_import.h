// mlbench-report --store S --import DIR: loads run folders written before into the results
// store (docs/report.md, "The results store"), idempotently: a report file already in the
// store under its run is skipped, a stall analysis already there (same stall.json text) too.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "store/results_store.h"

namespace mlbench::report {

struct ImportCounts {
  int instances_added = 0, instances_there = 0;
  std::set<std::string> runs;  // the runs whose reports were read
  int stalls_added = 0, stalls_there = 0;
  std::vector<std::string> warnings;  // files that could not be read, one line each
  int invalid = 0;                    // reports unreadable or not valid: imported as failed instances
};

// Imports DIR: a tree of run directories (R<k>/, output<k>/), one run directory, or one report
// file; and every stall.json under it. The run id of a report: its runner.run_id, else its
// run directory's (or the tree's) machine.json "run_id", else import_run_id(the folder).
// A report that does not validate (a field of the wrong type) is imported as a failed instance
// whose reason is the reader's (as mlbench-report --reports counts it), with a warning; so is
// a file named as a report that cannot be read (truncated, empty, JSON that is no report object):
// "unreadable report (not valid JSON)" of the benchmark and pass its name says.
// Throws InputError when DIR does not exist or holds neither instance reports nor stall
// analyses; store::StoreError when the store fails.
void import_into_store(store::ResultsStore& store, const std::filesystem::path& dir, ImportCounts& counts);

// "import-" + the first 16 hex digits of sha256 of the folder's canonical path: the id of a
// run folder written before runs had ids, the same on every import.
std::string import_run_id(const std::filesystem::path& folder);

// "imported 34 instance reports of 2 runs, 0 already there, 1 stall analysis".
std::string import_summary(const ImportCounts& counts);

}  // namespace mlbench::report
