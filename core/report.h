// The instance report of Contract 1: file naming, atomic writing, and the
// derived fields (train_item, timestamps).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "statistics.h"

namespace mlbench::core {

// `<suite>.<name>.R<run>.D<slot>[.FAIL].<UTC %Y%m%d-%H%M%S-%f>.json`
std::string report_file_name(const std::string& suite, const std::string& name, int run_id, int slot, bool failed,
                             std::chrono::system_clock::time_point when);

// UTC "YYYYmmdd-HHMMSS-ffffff" (microseconds), as in report file names.
std::string utc_file_timestamp(std::chrono::system_clock::time_point when);
// UTC ISO 8601 with microseconds and a Z: "2026-11-22T10:04:05.123456Z".
std::string utc_iso8601(std::chrono::system_clock::time_point when);

// Writes `content` to `file` atomically: a temporary file in the same
// directory, fsync, rename. Readers see the old file or the whole new one,
// never a part. Creates the directory. Throws std::runtime_error naming the path.
void write_file_atomic(const std::filesystem::path& file, const std::string& content);
void write_json_atomic(const std::filesystem::path& file, const nlohmann::json& value);

// train_item = {avg: items/train.avg, max: items/train.min, min: items/train.max,
// range: max - min, unit: "items/sec"} where items = items per train observation.
nlohmann::json train_item(const StatAccumulator& train, double items_per_observation);

}  // namespace mlbench::core
