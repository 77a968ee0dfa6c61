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

}  // namespace mlbench::core
