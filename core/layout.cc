#include "layout.h"

#include <cstdlib>

#include <fmt/format.h>

#include "build_info.h"

#ifndef MLBENCH_SOURCE_DIR
#define MLBENCH_SOURCE_DIR ""
#endif

namespace mlbench::core {
namespace layout {

namespace fs = std::filesystem;

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

fs::path prefix() {
  return (self_exe().parent_path() / "..").lexically_normal();
}

}  // namespace

fs::path self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p;
}

bool installed() {
  std::error_code ec;
  return !self_exe().empty() && fs::is_directory(prefix() / "share" / "mlbench", ec);
}

fs::path benchmarks_dir() {
  if (const char* v = env("MLBENCH_BENCH_DIR")) return v;
  if (installed()) return prefix() / "lib" / "mlbench" / "benchmarks";
  return prefix() / "benchmarks";
}

fs::path configs_dir() {
  if (const char* v = env("MLBENCH_CONFIG_DIR")) return v;
  if (installed()) return prefix() / "share" / "mlbench" / "configs";
  return fs::path(MLBENCH_SOURCE_DIR) / "configs";
}

fs::path probe_dir() {
  if (const char* v = env("MLBENCH_PROBE_DIR")) return v;
  if (const char* v = env("MLBENCH_PYTHON_DIR")) return v;  // the variable's name before probe/
  if (installed()) return prefix() / "share" / "mlbench" / "probe";
  return fs::path(MLBENCH_SOURCE_DIR) / "probe";
}

std::string version_line(const std::string& command) {
  return fmt::format("{} {} (commit {})", command, build_info::kVersion, build_info::kGitCommit);
}

}  // namespace layout
}  // namespace mlbench::core
