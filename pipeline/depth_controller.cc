#include "pipeline/depth_controller.h"

#include <algorithm>
#include <stdexcept>

namespace mlbench::pipeline {

DepthController::DepthController(DepthControllerConfig config) : config_(config), depth_(config.start) {
  if (config_.start < 1) throw std::invalid_argument("the adaptive depth must start at 1 or more");
  if (config_.bound < config_.start) throw std::invalid_argument("the adaptive depth's bound is below its start");
  if (!(config_.min_gain > 0)) throw std::invalid_argument("the adaptive depth's gain threshold must be > 0");
  if (config_.patience < 0) throw std::invalid_argument("the adaptive depth's patience must be >= 0");
  if (!(config_.min_interval_s >= 0)) throw std::invalid_argument("the adaptive depth's interval must be >= 0");
  if (config_.reads_per_depth < 1) throw std::invalid_argument("the adaptive depth needs >= 1 read per depth");
}

void DepthController::change_to(int depth, std::int64_t completed) {
  depth_ = depth;
  warming_ = true;
  warm_until_ = completed + depth;  // about the reads in flight when the depth changed
}

int DepthController::update(double now_s, std::int64_t completed) {
  if (settled_) return depth_;
  if (!started_) {
    started_ = true;
    change_to(depth_, completed);
  }
  if (warming_) {
    if (completed < warm_until_) return depth_;
    warming_ = false;
    t0_ = now_s;
    c0_ = completed;
    return depth_;
  }
  const double seconds = now_s - t0_;
  const std::int64_t reads = completed - c0_;
  if (seconds < config_.min_interval_s || reads < static_cast<std::int64_t>(config_.reads_per_depth) * depth_ ||
      !(seconds > 0)) {
    return depth_;
  }
  steps_.push_back({depth_, static_cast<double>(reads) / seconds});
  // NOTE [Adaptive depth]: on through rises and ties, ended by the bound or patience + 1 falls in a
  // row, settled at the deepest depth whose rate ties the best.
  const std::size_t last = steps_.size() - 1;
  const double g = config_.min_gain;
  if (best_ < 0 || steps_[last].rate > steps_[static_cast<std::size_t>(best_)].rate) best_ = static_cast<int>(last);
  const double best = steps_[static_cast<std::size_t>(best_)].rate;
  if (steps_[last].rate * (1 + g) < best) {
    ++falls_;
  } else {
    falls_ = 0;
  }
  if (depth_ < config_.bound && falls_ <= config_.patience) {
    change_to(std::min(2 * depth_, config_.bound), completed);
    return depth_;
  }
  settled_ = true;
  for (const Step& s : steps_) {
    if (s.rate * (1 + g) >= best) depth_ = s.depth;  // the steps go deeper: the last such is the deepest
  }
  return depth_;
}

nlohmann::json DepthController::to_json() const {
  nlohmann::json steps = nlohmann::json::array();
  for (const Step& s : steps_) steps.push_back({{"depth", s.depth}, {"rate", s.rate}});
  return {{"start", config_.start},
          {"bound", config_.bound},
          {"min_gain", config_.min_gain},
          {"patience", config_.patience},
          {"settled", settled_ ? nlohmann::json(depth_) : nlohmann::json()},
          {"steps", std::move(steps)}};
}

}  // namespace mlbench::pipeline
