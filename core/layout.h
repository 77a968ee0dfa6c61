// Where a command finds its parts, so that it works installed as well as from its build
// tree (docs/runner.md, "Installing"). For each part, in this order:
//   1. the environment variable that overrides it (MLBENCH_BENCH_DIR, MLBENCH_CONFIG_DIR,
//      MLBENCH_PROBE_DIR);
//   2. beside the running executable as installed: <prefix>/bin/<command> finds
//      <prefix>/lib/mlbench/benchmarks, <prefix>/share/mlbench/configs (jobs files,
//      targets/), <prefix>/share/mlbench/probe (the --exec probe);
//   3. the build tree it was built in: <build>/bin/<command> finds <build>/benchmarks, and
//      the source tree's configs/ and probe/.
// An installed command never falls back to the build tree (nor the build machine's paths).
#pragma once

#include <filesystem>
#include <string>

namespace mlbench::core::layout {

// This process's executable (/proc/self/exe), or empty when unreadable.
std::filesystem::path self_exe();
// Whether the executable sits in an installed tree (<exe>/../share/mlbench exists).
bool installed();
std::filesystem::path benchmarks_dir();
std::filesystem::path configs_dir();
std::filesystem::path probe_dir();
// "<command> 0.1.0 (commit 1a2b3c4d5e6f)": --version of every command, as the reports record it.
std::string version_line(const std::string& command);

}  // namespace mlbench::core::layout
