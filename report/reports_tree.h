// Reads a reports tree (Contract 3): DIR/R<k>/ or DIR/output<k>/ run
// directories, each with instance reports (Contract 1). Keeps the reports of
// one suite, grouped by benchmark and run; decides which instances failed.
#pragma once

#include <filesystem>
#include <map>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/instance_report.h"
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

// What --reports names: a tree of run directories (R0.., output0..), one run
// directory holding instance reports (no R0..), or one report file.
enum class ReportsInput { Tree, RunDirectory, ReportFile };
ReportsInput reports_input_kind(const std::filesystem::path& path);

// A train_item.avg above this is taken for a corrupt value (a failed instance with a
// warning), not a speed: far beyond any training loop, far below the 1e308 of a bad write.
inline constexpr double kImplausibleItemsPerS = 1e12;

// Run number of a run directory name: "R3" -> 3, "output7" -> 7, anything else -> -1.
int run_number(const std::string& dir_name);

// "<suite>.<name>.R<run>.D<slot>[.FAIL].<timestamp>.json" (core::report_file_name) -> its suite,
// name and run; nullopt for a file not named as a report. With `suite`, the file must be one of
// that suite's (a suite's name may hold dots); without, the suite is the part before the first
// '.'. `run` is nullopt where its digits do not fit an int.
struct ReportFileName {
  std::string suite, name;
  std::optional<int> run;
};
std::optional<ReportFileName> parse_report_file_name(const std::string& file, const std::string& suite = "");

// One parsed report reduced to an Instance. Failed when the file name holds
// ".FAIL.", `completed` is not true, `batch_loss` holds null or a non-finite
// number, or train_item.avg is missing or not a positive number.
Instance parse_instance(const nlohmann::json& report, const std::string& file_name);
// The same from a report already read (core/instance_report.h).
Instance parse_instance(const core::InstanceReport& report, const std::string& file_name);

// Reads every run directory under `dir`; reports whose `suite` is not `suite`
// are counted and ignored. Throws InputError when `dir` is not a directory,
// holds no run directory, or fewer than `min_runs` of them hold reports of the
// suite (the message says how many were found). A single run directory or a
// single report file (reports_input_kind) is read as one run, whatever `min_runs`.
// A file named as a report of the suite that is not valid JSON or not a report
// object, and a report whose train_item.avg is above kImplausibleItemsPerS, are
// failed instances with a warning.
// Messages name `dir` after `flag`, the option that gave it ("--reports", "--compare").
ReportsTree load_reports_tree(const std::filesystem::path& dir, const std::string& suite, int min_runs,
                              const std::string& flag = "--reports");

}  // namespace mlbench::report
