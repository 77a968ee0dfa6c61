// The instance report of Contract 1: its derived fields (train_item). Naming
// (report_name.h) and atomic writing (atomic_file.h) live in their own files;
// this header includes both, so a benchmark that writes a report needs one include.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "atomic_file.h"
#include "report_name.h"
#include "statistics.h"

namespace mlbench::core {

// train_item = {avg: items/train.avg, max: items/train.min, min: items/train.max,
// range: max - min, unit: "items/sec"} where items = items per train observation.
nlohmann::json train_item(const StatAccumulator& train, double items_per_observation);

// process_cpu = the process's CPU time (every thread) during the kept observations:
// {user_s, sys_s, wall_s (their seconds), busy_cpus = (user + sys) / wall,
// per_item_us = (user + sys) / items}; null figures when nothing was kept.
nlohmann::json process_cpu(double user_s, double sys_s, double wall_s, double items);

}  // namespace mlbench::core
