// Test support: run a benchmark binary with its output in a log file, then
// read back every report it wrote into its --report directory.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/process.h"

namespace mlbench::testing_support {

struct BenchRun {
  int exit_code = -1;                     // exit status, -1 when killed
  std::string output;                     // stdout + stderr
  std::vector<nlohmann::json> reports;    // every file in the report directory
  std::vector<std::string> report_names;  // their file names, in the same order
};

// Runs `command` (which must write its reports into `reports`) with stdout and
// stderr redirected to `log`.
inline BenchRun run_bench(const std::string& command, const std::filesystem::path& reports,
                          const std::filesystem::path& log) {
  std::filesystem::create_directories(reports);
  BenchRun r;
  core::ProcessSpec spec;
  spec.executable = "/bin/sh";
  spec.args = {"-c", command};
  spec.output = core::Output::File;
  spec.log_path = log.string();
  const core::ExitStatus status = core::Process(spec).wait();
  r.exit_code = status.exited ? status.code : -1;
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  for (const auto& e : std::filesystem::directory_iterator(reports)) {
    std::ifstream f(e.path());
    r.reports.push_back(nlohmann::json::parse(f));
    r.report_names.push_back(e.path().filename().string());
  }
  return r;
}

}  // namespace mlbench::testing_support
