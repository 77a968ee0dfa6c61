// From what the report readers make of a file to the store's rows: an instance
// report's queried columns (store::InstanceRecord), by the same rules as
// mlbench-report's tables (parse_instance: what failed, items/s, the stall).
#pragma once

#include <cstdint>
#include <string>

#include "core/instance_report.h"
#include "store/results_store.h"

namespace mlbench::report {

// `file`: the report's path relative to the run's output folder (e.g. "R0/fast.loader.R0.D0.<ts>.json").
store::InstanceRecord instance_record(const core::InstanceReport& r, const std::string& file, const std::string& run_id,
                                      std::int64_t pass);

}  // namespace mlbench::report
