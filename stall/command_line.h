// mlbench-stall's command line, apart from its measuring session (stall/session.h): the options
// as parsed, and their checks (each a one-line error and exit status 2).
#pragma once

#include <optional>
#include <string>

#include "exec_target.h"
#include "plan.h"
#include "run_sizing.h"

namespace mlbench::stall {

struct StallOptions {
  StallConfig config;
  ExecConfig exec;
  bool exec_mode = false;
  std::string bench_dir;
  std::string out_dir;
  std::string reanalyze_dir;
  std::string store;           // --store: a results store to record the analysis in ("" = none)
  std::string data_directory;  // $DATA_DIRECTORY, else "data"
  bool use_drop_caches = false;
  int timeout_s = 600;
  int rounds = 1;
  // Runs sized by their noise (stall/run_sizing.h): --target-noise (as a fraction here),
  // --max-run-time; rounds added on drift up to --max-rounds (0 on the command line: --rounds + 2
  // from 2 rounds, else --rounds).
  SizingRule sizing;
  int max_rounds = 0;
  bool cache_fracs_given = false, page_fracs_given = false, io_depths_given = false, ranks_given = false;
};

// The options in argv; `exit` is set when the program should end now (--help, --version: 0; a bad
// flag: 2, its message printed).
struct ParsedCommandLine {
  StallOptions options;
  std::optional<int> exit;
};
ParsedCommandLine parse_command_line(int argc, char** argv);

// Checks the options of an analysis (not --reanalyze) and fills in what they leave to defaults
// (--exec's command and probe, --data, --out, --cpus); 0, or 2 after printing the error.
int check_options(StallOptions& o);

}  // namespace mlbench::stall
