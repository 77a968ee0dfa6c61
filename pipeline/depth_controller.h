// The requests in flight for a dataset over HTTP when --io-depth is not given (docs/pipeline.md,
// "Read-ahead"): the read-ahead depth chosen from what the reads themselves measure. A pure rule,
// fed with the time and the count of reads completed so far, that returns the depth to use; the
// read-ahead (pipeline/read_ahead.h) feeds it after each read and follows what it says. No clock
// of its own: tests feed it times and synthetic rates. See NOTE [Adaptive depth].
//
// NOTE [Adaptive depth]
// Over HTTP the depth sets the fetch rate (N requests in flight fetch about N / L objects/s for a
// request time L) until something else bounds it: the server's bandwidth, the loader's CPUs, the
// consumer. So the controller starts at `start` (8), measures the rate of completed reads at that
// depth, doubles it, measures again, and keeps the new depth when its rate beats the best kept so
// far by at least `min_gain` (10%). It goes on doubling up to `bound` (128) while depths are kept,
// and past up to `patience` (2) doublings in a row that were not: the rate is not a smooth curve
// of the depth. Near the knee it creeps (the fetch overlaps prep more evenly as more reads are in
// flight: at +20 ms, 32 to 64 gained 6% and 64 to 128 another 12%), and where prep bounds it,
// 32 and 64 can measure alike and 128 12% more (likely because with batches of 32 and 2 workers
// each worker can then issue its next batch's reads whole; docs/performance.md, "Datasets over
// HTTP"). Too deep costs little (idle threads,
// kept connections), too shallow costs the rate: the search leans deep. It ends at the bound or
// after `patience` + 1 doublings in a row that were not kept; the depth then settles at
// the last one kept (the knee) for the rest of the run. A measurement skips the first `depth`
// reads after each change (issued at the old depth, or at start-up the connections being opened),
// then spans at least `min_interval_s` and at least `reads_per_depth` x depth reads, so that one
// slow request or a scheduler hiccup is a small part of it. A rate bounded elsewhere (prep-bound,
// a slow consumer) does not rise, and the depth stays at `start` after tries of 2x, 4x and 8x.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlbench::pipeline {

// The most requests in flight the adaptive depth tries (docs/pipeline.md, "Read-ahead"): at +20 ms
// a request, 64 in flight were still latency-bound on real photographs (docs/performance.md,
// "Datasets over HTTP"); 128 idle threads and kept connections cost little, and a bound ends the
// search where every doubling still pays.
inline constexpr int kAdaptiveIoDepthBound = 128;

struct DepthControllerConfig {
  int start = 8;  // the first depth (--io-depth's default)
  int bound = kAdaptiveIoDepthBound;
  double min_gain = 0.10;       // a doubling is kept when the rate rose by at least this share
  int patience = 2;             // doublings in a row not kept that the search goes on past
  double min_interval_s = 0.5;  // a measurement spans at least this long ...
  int reads_per_depth = 4;      // ... and at least this many reads per request in flight
};

class DepthController {
 public:
  // One measurement: the rate of completed reads (per second) at a depth.
  struct Step {
    int depth = 0;
    double rate = 0;
  };

  // Throws std::invalid_argument for a start < 1, a bound < start, a gain <= 0, a patience < 0,
  // an interval < 0 or reads_per_depth < 1.
  explicit DepthController(DepthControllerConfig config);

  // `now_s`: seconds on a steady clock (any origin, never going back); `completed`: reads completed
  // so far (never fewer than at the last call). Returns the depth to use from now on.
  int update(double now_s, std::int64_t completed);

  int depth() const { return depth_; }
  // Whether the search ended (then depth() no longer changes).
  bool settled() const { return settled_; }
  const std::vector<Step>& steps() const { return steps_; }
  const DepthControllerConfig& config() const { return config_; }

  // The report's read_ahead.adaptive (docs/pipeline.md): {"start", "bound", "min_gain", "patience",
  // "settled" (the depth, or null while still measuring), "steps": [{"depth", "rate"}]}.
  nlohmann::json to_json() const;

 private:
  void change_to(int depth, std::int64_t completed);

  DepthControllerConfig config_;
  int depth_;
  bool started_ = false, settled_ = false;
  bool warming_ = true;          // skipping the reads issued before the last change
  std::int64_t warm_until_ = 0;  // ... until this many reads completed
  double t0_ = 0;                // the measurement's start
  std::int64_t c0_ = 0;
  std::vector<Step> steps_;
  int kept_ = -1;     // index in steps_ of the last depth kept (the rate to beat); -1: none yet
  int not_kept_ = 0;  // doublings in a row since it that were not kept
};

}  // namespace mlbench::pipeline
