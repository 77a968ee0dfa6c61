#include "pipeline/stats.h"

#include <algorithm>

namespace mlbench::pipeline {

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::Fetch: return "fetch";
    case Stage::Decode: return "decode";
    case Stage::Augment: return "augment";
    case Stage::Collate: return "collate";
  }
  return "?";
}

void PipelineStats::add(const BatchCounters& c) {
  for (int s = 0; s < kStages; ++s) {
    busy_ns_[s].fetch_add(c.busy_ns[s], std::memory_order_relaxed);
    items_[s].fetch_add(c.items[s], std::memory_order_relaxed);
  }
  bytes_read_.fetch_add(c.bytes_read, std::memory_order_relaxed);
  bytes_cached_.fetch_add(c.bytes_cached, std::memory_order_relaxed);
  corrupt_.fetch_add(c.corrupt, std::memory_order_relaxed);
}

void PipelineStats::record_wait(double seconds, int ready_batches) {
  if (!enabled_) return;
  wait_.add(seconds);
  queue_depth_sum_ += ready_batches;
  queue_depth_max_ = std::max(queue_depth_max_, ready_batches);
  ++queue_depth_samples_;
}

nlohmann::json PipelineStats::to_json() const {
  nlohmann::json stages = nlohmann::json::object();
  for (int s = 0; s < kStages; ++s) {
    const double busy = static_cast<double>(busy_ns_[s].load()) * 1e-9;
    const auto items = items_[s].load();
    stages[stage_name(static_cast<Stage>(s))] = {
        {"busy_s", busy},
        {"items", items},
        {"per_item_ms", items > 0 ? nlohmann::json(busy * 1e3 / static_cast<double>(items)) : nlohmann::json()}};
  }
  nlohmann::json out{{"stats_enabled", enabled_},
                     {"stages", stages},
                     {"batches", batches_.load()},
                     {"bytes_read", bytes_read_.load()},
                     {"bytes_from_cache", bytes_cached_.load()},
                     {"corrupt_samples", corrupt_.load()},
                     {"consumer_wait", wait_.to_json("s")},
                     {"consumer_wait_total_s", wait_.sum()}};
  out["queue_depth"] = queue_depth_samples_ > 0
                           ? nlohmann::json{{"mean", queue_depth_sum_ / static_cast<double>(queue_depth_samples_)},
                                            {"max", queue_depth_max_},
                                            {"samples", queue_depth_samples_}}
                           : nlohmann::json();
  return out;
}

}  // namespace mlbench::pipeline
