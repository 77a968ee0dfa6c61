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
// depth, doubles it, measures again, and so on up to `bound` (128). It leans deep: too deep costs
// little over HTTP (idle threads, kept connections; the reads ahead are bounded by the workers'
// batches whatever the depth), too shallow costs the rate. A measurement is a `rate`; the best so
// far is `best`. A rate ties the best when rate x (1 + `min_gain`) >= best (10%), and falls when
// below that. The search doubles on through rises and ties, and ends at the bound or after
// `patience` + 1 (3) falls in a row. The depth then settles, for the rest of the run, at the
// DEEPEST depth measured whose rate ties the best one.
// Why ties go deeper: a half-second measurement inside a loader is noisy at +-5-10%, and the rate
// is no smooth curve of the depth. On real photographs at +2 ms a request, fixed runs measured 16,
// 32 and 64 alike (2,954-2,982 images/s) and 128 11% above (3,307; likely because with batches of
// 32 and 2 workers each worker can then issue its next batch's reads whole); the searches measured
// 8:2163 16:2881 32:3007 64:2989 128:3162 and 8:2040 16:2715 32:2872 64:3093 128:2986. The rule
// before this one kept a depth only when it rose 10% over the last kept, and settled at the last
// kept: at 16 and 64 there, and the default ran at 0.87 of depth 128's rate (studies/results/
// 2026-11-29-adaptive-io-depth.md). The same log has generated images at +2 ms measuring 8:1592
// 16:1628 32:1660 64:1652 (it stayed at 8) and 8:1373 16:1581 32:1589 64:1403 128:1499 (a 12% dip
// at 64, then back): both end at 128 now, the best fixed depth there too. Falls end the search where deeper clearly
// costs (a server that slows under more connections): 3 in a row, as one dip of 12% was noise.
// A rate bounded elsewhere (prep-bound, a slow consumer) measures flat and the depth now ends at
// the bound, where the rule before stayed at `start`: in both prep-bound settings measured (the
// two datasets at +2 ms) fixed depth 128's median was the best, so no guard keeps a flat rate
// shallow; `--io-depth N` does, for a server that should see fewer connections. A measurement
// skips the first `depth` reads after each change (issued at the old depth, or at start-up the
// connections being opened), then spans at least `min_interval_s` and at least `reads_per_depth`
// x depth reads, so that one slow request or a scheduler hiccup is a small part of it.
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
  double min_gain = 0.10;       // a rate r ties the best b when r x (1 + min_gain) >= b; else it fell
  int patience = 2;             // falls in a row that the search goes on past
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
  int best_ = -1;  // index in steps_ of the best rate measured; -1: none yet
  int falls_ = 0;  // doublings in a row that measured more than min_gain below it
};

}  // namespace mlbench::pipeline
