// The report's derived fields (see report.h).
#include "report.h"

#include <nlohmann/json.hpp>

namespace mlbench::core {

nlohmann::json train_item(const StatAccumulator& train, double items_per_observation) {
  if (train.count() == 0 || !(train.min() > 0.0)) {
    return {{"avg", nullptr}, {"min", nullptr}, {"max", nullptr}, {"range", nullptr}, {"unit", "items/sec"}};
  }
  const double avg = items_per_observation / train.mean();
  const double max = items_per_observation / train.min();
  const double min = items_per_observation / train.max();
  return {{"avg", avg}, {"min", min}, {"max", max}, {"range", max - min}, {"unit", "items/sec"}};
}

nlohmann::json process_cpu(double user_s, double sys_s, double wall_s, double items) {
  if (!(wall_s > 0.0) || !(items > 0.0)) {
    return {
        {"user_s", nullptr}, {"sys_s", nullptr}, {"wall_s", nullptr}, {"busy_cpus", nullptr}, {"per_item_us", nullptr}};
  }
  const double cpu = user_s + sys_s;
  return {{"user_s", user_s},
          {"sys_s", sys_s},
          {"wall_s", wall_s},
          {"busy_cpus", cpu / wall_s},
          {"per_item_us", 1e6 * cpu / items}};
}

}  // namespace mlbench::core
