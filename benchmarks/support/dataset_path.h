// Where a benchmark finds its dataset: --data, else
// <DATA_DIRECTORY>/<dataset> (the mlbench-datagen name, full size). A missing
// dataset is a usage error with one line naming the path and the command that
// creates it.
#pragma once

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "core/benchmark_run.h"
#include "core/cli.h"

namespace mlbench::bench {

// `probe` is a file or folder inside the dataset that must exist ("" = the folder itself).
inline std::filesystem::path dataset_path(const core::BenchOptions& o, const std::string& dataset,
                                          const std::string& probe = "") {
  const std::filesystem::path dir =
      o.data.empty() ? std::filesystem::path(o.data_directory) / dataset : std::filesystem::path(o.data);
  const std::filesystem::path check = probe.empty() ? dir : dir / probe;
  std::error_code ec;
  if (!std::filesystem::exists(check, ec)) {
    const std::string root = o.data.empty() ? o.data_directory : dir.parent_path().string();
    const std::string name = o.data.empty() ? dataset : dir.filename().string();
    throw core::UsageError(fmt::format("dataset not found: {} is missing; create it with: mlbench-datagen ensure {} "
                                       "--root {} (or pass --data PATH)",
                                       check.string(), name.empty() ? dataset : name, root.empty() ? "." : root));
  }
  return dir;
}

}  // namespace mlbench::bench
