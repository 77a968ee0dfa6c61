// Naming of instance reports (Contract 1) and the UTC timestamps that reports
// and markers carry.
#pragma once

#include <chrono>
#include <string>

namespace mlbench::core {

// `<suite>.<name>.R<run>.D<slot>[.FAIL].<UTC %Y%m%d-%H%M%S-%f>.json`
std::string report_file_name(const std::string& suite, const std::string& name, int run_id, int slot, bool failed,
                             std::chrono::system_clock::time_point when);

// UTC "YYYYmmdd-HHMMSS-ffffff" (microseconds), as in report file names.
std::string utc_file_timestamp(std::chrono::system_clock::time_point when);
// UTC ISO 8601 with microseconds and a Z: "2026-11-22T10:04:05.123456Z".
std::string utc_iso8601(std::chrono::system_clock::time_point when);

}  // namespace mlbench::core
