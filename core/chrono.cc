#include "chrono.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace mlbench::core {

Chrono::Scope Chrono::time(const std::string& name) {
  if (sync_) sync_();
  std::string parent;
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    if (it->active) {
      parent = it->name;
      break;
    }
  }
  if (stages_.find(name) == stages_.end()) {
    stages_.emplace(name, Stage{StatAccumulator(warmup_), parent});
    order_.push_back(name);
  }
  open_.push_back(Open{name, now_(), true});
  return Scope(this, open_.size() - 1);
}

double Chrono::close(std::size_t index) {
  Open& open = open_.at(index);
  if (!open.active) return 0.0;
  if (sync_) sync_();
  const double seconds = std::chrono::duration<double>(now_() - open.start).count();
  stages_.at(open.name).stats.add(seconds);
  open.active = false;
  while (!open_.empty() && !open_.back().active) open_.pop_back();
  return seconds;
}

double Chrono::Scope::stop() {
  if (chrono_ == nullptr) return 0.0;
  Chrono* c = chrono_;
  chrono_ = nullptr;
  return c->close(index_);
}

const StatAccumulator& Chrono::stage(const std::string& name) const { return stages_.at(name).stats; }

std::string Chrono::parent(const std::string& name) const { return stages_.at(name).parent; }

std::vector<std::string> Chrono::names() const { return order_; }

nlohmann::json Chrono::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& name : order_) {
    const Stage& s = stages_.at(name);
    nlohmann::json j = s.stats.to_json("s");
    if (!s.parent.empty()) j["parent"] = s.parent;
    out[name] = std::move(j);
  }
  return out;
}

}  // namespace mlbench::core
