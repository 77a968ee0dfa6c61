// The table mlbench-run prints when a run ends (also after Ctrl-C, with what
// finished): one row per job (per sweep point), instances passed/total, items/s
// (mean over the passed instances, and their spread), stall %, the difference
// from this machine kind's target, and for failures the one-line reasons.
// Pure: rows in, text out (colour only when asked).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mlbench::runner {

struct ResultRow {
  std::string title;  // "loader" or "loader [--batch-size 64]"
  int passed = 0;
  int instances = 0;                  // instances that ended (0: the job did not run)
  std::vector<double> items_per_s;    // train_item.avg of each passed instance
  std::vector<double> stall_pct;      // stall.stall_pct of each passed instance
  std::optional<double> target;       // items/s on this machine kind
  std::vector<std::string> failures;  // "D1: oom" ("R2/D1: oom" with several passes), one per failed instance
};

// One row's numbers, as printed.
struct ResultCells {
  std::string passed;     // "2/2", "-" when not run
  std::string items;      // mean items/s; "-" without a passed instance
  std::string spread;     // "±1.2%": sample sd / mean over instances; "-" with fewer than 2
  std::string stall;      // "12.3%": mean stall of the passed instances
  std::string vs_target;  // "+4.5%": mean / target - 1; "-" without a target
  std::string note;       // "FAILED D1: oom; D0: exit 1", "not run", or ""
};
ResultCells result_cells(const ResultRow& row);

// "1234567", "1234", "12.35", "0.123": enough digits to compare, none to spare.
std::string format_rate(double items_per_s);

// The header, a rule and one line per row (each ending in '\n'). With `color`: passed
// counts and the target difference green or red, failures red.
std::string format_results_table(const std::vector<ResultRow>& rows, bool color);

}  // namespace mlbench::runner
