// The instance report of Contract 1: its derived fields (train_item, process_cpu, a timer's
// statistics) as blocks of the typed record (instance_report.h). Naming (report_name.h) and
// atomic writing (atomic_file.h) live in their own files; this header includes both, so a
// benchmark that writes a report needs one include.
#pragma once

#include "atomic_file.h"
#include "instance_report.h"
#include "report_name.h"
#include "statistics.h"

namespace mlbench::core {

// train_item = {avg: items/train.avg, max: items/train.min, min: items/train.max,
// range: max - min, unit: "items/sec"} where items = items per train observation.
TrainItem train_item(const StatAccumulator& train, double items_per_observation);

// process_cpu = the process's CPU time (every thread) during the kept observations:
// {user_s, sys_s, wall_s (their seconds), busy_cpus = (user + sys) / wall,
// per_item_us = (user + sys) / items, host_busy_cpus = host_busy_s / wall: the whole machine's
// busy CPUs over the same seconds, this process's included}; unset figures when nothing was kept
// (host_busy_cpus also when the machine's CPU time was not read).
ProcessCpuBlock process_cpu(double user_s, double sys_s, double wall_s, double items,
                            std::optional<double> host_busy_s = std::nullopt);

// A timer's {avg, min, max, sd, count, unit}: unset figures when it has none.
Stats stats_of(const StatAccumulator& s, const char* unit = "s");

}  // namespace mlbench::core
