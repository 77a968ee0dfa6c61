// Test helper: writes generated instance reports (Contract 1 fields that
// mlbench-report reads) into a reports tree, so report tests need no runner
// and no benchmark.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

namespace mlbench::report::testing {

struct FakeInstance {
  std::string suite = "fast";
  std::string name = "toy_reg";
  int run = 0;
  int slot = 0;
  double items_per_s = 1000.0;
  bool completed = true;
  bool fail_file = false;  // ".FAIL." in the file name
  bool nan_loss = false;   // a null in batch_loss
  std::optional<double> stall_pct = 10.0;
  double wait_s = 0.001, h2d_s = 0.0005, compute_s = 0.0085;
  nlohmann::json extra = nlohmann::json::object();  // fields added to the report as they are (e.g. `stability`)
};

// The report object the real BenchmarkRun would write (the fields the report reads).
nlohmann::json fake_report(const FakeInstance& i);
// Writes it as `<root>/R<run>/<file name from core::report_file_name>` and returns the path;
// `run_dir` replaces "R<run>" (e.g. "output3").
std::filesystem::path write_fake_report(const std::filesystem::path& root, const FakeInstance& i,
                                        const std::string& run_dir = "");

// A fresh temporary directory, removed by the destructor (the tests' one helper).
using testing_support::TempDir;

// Runs a shell command (testing_support::run_command); returns its exit status
// (-1 when killed) and stdout+stderr.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult run_command(const std::string& command);
std::string read_text(const std::filesystem::path& file);

}  // namespace mlbench::report::testing
