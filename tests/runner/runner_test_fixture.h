// The fixture of the runner's end-to-end tests (runner_e2e_test.cc,
// runner_faults_test.cc): a scratch directory per test (kept when it fails), a
// jobs file written into it, the real mlbench-run (MLBENCH_RUN) on it with
// fakebench (FAKEBENCH), and the instance reports it wrote.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace mlbench::testing_support {

class RunnerTest : public ::testing::Test {
 protected:
  explicit RunnerTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    tmp_ = temp_dir_for_current_test(prefix_);
    dir_ = tmp_->path();
  }
  void TearDown() override {
    if (HasFailure()) tmp_->keep();  // for a look at the run directory
  }
  // A jobs file in the test directory; FAKE stands for fakebench's path.
  std::string jobs(const std::string& text) {
    std::string t = text;
    for (auto p = t.find("FAKE"); p != std::string::npos; p = t.find("FAKE")) t.replace(p, 4, FAKEBENCH);
    const std::filesystem::path f = dir_ / "jobs.json";
    std::ofstream(f) << t;
    return f.string();
  }
  CommandResult runner(const std::string& args) {
    return run_command(std::string(MLBENCH_RUN) + " --outdir " + (dir_ / "out").string() + " " + args);
  }
  // The reports of `job` in out/, by jr_id, each with "_file" (its name) and "_path".
  std::vector<nlohmann::json> reports(const std::string& job) {
    std::vector<nlohmann::json> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_ / "out")) {
      const std::string n = e.path().filename().string();
      if (n.find("." + job + ".R") != std::string::npos && e.path().extension() == ".json") {
        nlohmann::json j = nlohmann::json::parse(std::ifstream(e.path()));
        j["_file"] = n;
        j["_path"] = e.path().string();
        out.push_back(j);
      }
    }
    std::sort(out.begin(), out.end(),
              [](const nlohmann::json& a, const nlohmann::json& b) { return a["jr_id"] < b["jr_id"]; });
    return out;
  }

  std::string prefix_;
  std::unique_ptr<TempDir> tmp_;
  std::filesystem::path dir_;
};

}  // namespace mlbench::testing_support
