// The report's derived fields (see report.h).
#include "report.h"

#include <cmath>

namespace mlbench::core {

namespace {
std::optional<double> finite(double x) {
  return std::isfinite(x) ? std::optional<double>(x) : std::nullopt;
}
}  // namespace

TrainItem train_item(const StatAccumulator& train, double items_per_observation) {
  TrainItem t;
  t.unit = "items/sec";
  t.avg_written = true;
  if (train.count() == 0 || !(train.min() > 0.0)) return t;
  t.avg = items_per_observation / train.mean();
  t.max = items_per_observation / train.min();
  t.min = items_per_observation / train.max();
  t.range = *t.max - *t.min;
  return t;
}

ProcessCpuBlock process_cpu(double user_s, double sys_s, double wall_s, double items,
                            std::optional<double> host_busy_s) {
  if (!(wall_s > 0.0) || !(items > 0.0)) return {};
  const double cpu = user_s + sys_s;
  ProcessCpuBlock b{.user_s = user_s,
                    .sys_s = sys_s,
                    .wall_s = wall_s,
                    .busy_cpus = cpu / wall_s,
                    .per_item_us = 1e6 * cpu / items,
                    .host_busy_cpus = std::nullopt};
  if (host_busy_s && *host_busy_s >= 0) b.host_busy_cpus = *host_busy_s / wall_s;
  return b;
}

Stats stats_of(const StatAccumulator& s, const char* unit) {
  return {.avg = finite(s.mean()),
          .min = finite(s.min()),
          .max = finite(s.max()),
          .sd = finite(s.sd()),
          .count = static_cast<std::int64_t>(s.count()),
          .unit = unit};
}

}  // namespace mlbench::core
