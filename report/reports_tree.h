// Reads a reports tree (Contract 3): DIR/R<k>/ or DIR/output<k>/ run
// directories, each with instance reports (Contract 1). Keeps the reports of
// one suite, grouped by benchmark and run; decides which instances failed.
#pragma once

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report_model.h"

namespace mlbench::report {

// A user-caused problem with the input (missing folder, too few runs, bad file):
// main prints "mlbench-report: error: <what>" and exits 1.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ReportsTree {
  std::vector<std::string> runs;              // run directories holding reports of the suite, in order
  std::map<std::string, BenchInput> benches;  // by benchmark name
  LoadNotes notes;
};

// Run number of a run directory name: "R3" -> 3, "output7" -> 7, anything else -> -1.
int run_number(const std::string& dir_name);

// One parsed report reduced to an Instance. Failed when the file name holds
// ".FAIL.", `completed` is not true, `batch_loss` holds null or a non-finite
// number, or train_item.avg is missing or not a positive number.
Instance parse_instance(const nlohmann::json& report, const std::string& file_name);

// Reads every run directory under `dir`; reports whose `suite` is not `suite`
// are counted and ignored. Throws InputError when `dir` is not a directory,
// holds no run directory, or fewer than `min_runs` of them hold reports of the
// suite (the message says how many were found). Messages name `dir` after `flag`,
// the option that gave it ("--reports", "--compare").
ReportsTree load_reports_tree(const std::filesystem::path& dir, const std::string& suite, int min_runs,
                              const std::string& flag = "--reports");

}  // namespace mlbench::report
