// mlbench-report --store: import run folders into the results store and show its views
// (the history, the machines side by side) or write targets from it. docs/report.md, "The
// results store".
#pragma once

#include <string>
#include <vector>

namespace mlbench::report {

struct StoreCommand {
  std::string store;                 // a SQLite file or a postgresql:// URL
  std::vector<std::string> imports;  // --import DIR, in order
  bool history = false;
  std::string history_bench;  // --history BENCH ("" = every benchmark)
  bool machines = false;
  std::string suite;  // --name ("" = every suite for the views; the one suite for --write-targets)
  std::string csv, json, html;
  std::string write_targets, machine_kind, targets_note;
  int min_runs = 4;
  bool color = false;
};

// Runs it: 0, or 1 after one line "mlbench-report: error: ..." on stderr (a store that cannot
// be opened or read, a folder that is not a run, a view of an empty store).
int run_store_command(const StoreCommand& command);

}  // namespace mlbench::report
