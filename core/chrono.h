// Named, nestable timed stages. Each stage name owns a StatAccumulator that
// drops the first `warmup` observations. A synchronise hook runs at every stage
// edge so device work (CUDA) is finished before the clock is read there, and
// only there.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "statistics.h"

namespace mlbench::core {

// The clock every timed stage and training phase reads: steady_clock, unless a
// test injects a fake one (a plain function pointer, so the real clock costs no
// more than a direct call).
using SteadyTime = std::chrono::steady_clock::time_point;
using NowFn = SteadyTime (*)();
inline SteadyTime steady_now() {
  return std::chrono::steady_clock::now();
}

class Chrono {
 public:
  using Clock = std::chrono::steady_clock;
  using SyncHook = std::function<void()>;

  explicit Chrono(std::size_t warmup = 0, SyncHook sync = {}, NowFn now = &steady_now)
      : warmup_(warmup), sync_(std::move(sync)), now_(now) {}

  void set_sync(SyncHook sync) { sync_ = std::move(sync); }

  // RAII scope: the stage runs from time() until the Scope is destroyed (or stop()).
  class Scope {
   public:
    Scope(Scope&& other) noexcept : chrono_(other.chrono_), index_(other.index_) { other.chrono_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope() { stop(); }
    // Ends the stage now; returns its duration in seconds (0 if already stopped).
    double stop();

   private:
    friend class Chrono;
    Scope(Chrono* c, std::size_t index) : chrono_(c), index_(index) {}
    Chrono* chrono_;
    std::size_t index_;
  };

  // Starts stage `name`, nested in whatever stage is open.
  [[nodiscard]] Scope time(const std::string& name);

  bool has(const std::string& name) const { return stages_.count(name) != 0; }
  const StatAccumulator& stage(const std::string& name) const;  // throws std::out_of_range
  // The enclosing stage's name the first time `name` was opened ("" at top level).
  std::string parent(const std::string& name) const;
  std::vector<std::string> names() const;  // in order of first use

  // {name: {"avg","min","max","sd","count","unit":"s"[, "parent"]}} for every stage.
  nlohmann::json to_json() const;

 private:
  struct Stage {
    StatAccumulator stats;
    std::string parent;
  };
  struct Open {
    std::string name;
    Clock::time_point start;
    bool active;
  };
  double close(std::size_t index);

  std::size_t warmup_;
  SyncHook sync_;
  NowFn now_;
  std::map<std::string, Stage> stages_;
  std::vector<std::string> order_;
  std::vector<Open> open_;
};

}  // namespace mlbench::core
