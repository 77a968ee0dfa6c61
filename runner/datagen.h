// Datasets a job needs (its `dataset` field) are made by `mlbench-datagen ensure
// <dataset>` before its instances start: the request to launch it and what its
// ending means. The scheduler runs it once per dataset and run.
#pragma once

#include <filesystem>
#include <string>

#include "launcher.h"

namespace mlbench::runner {

// mlbench-datagen beside mlbench-run.
std::filesystem::path datagen_path(const std::string& runner_dir);

// "dataset tiny: mlbench-datagen not found at /x/mlbench-datagen (build it)" when it is
// missing, else "".
std::string datagen_missing(const std::string& dataset, const std::filesystem::path& datagen);

// `datagen ensure <dataset> --root <data_dir>`, logged to outdir/datagen.<dataset>.log.
LaunchRequest datagen_request(const std::filesystem::path& datagen, const std::string& dataset,
                              const std::filesystem::path& outdir, const std::string& data_dir);

// "" when it succeeded, else "dataset <name>: <last line of its log, or exit N / killed>".
std::string datagen_failure(const std::string& dataset, const Ending& ending, const std::filesystem::path& log);

}  // namespace mlbench::runner
