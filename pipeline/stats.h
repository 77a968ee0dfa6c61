// Pipeline instrumentation, always on and cheap: per-stage busy time and item
// counts (fetch, decode, augment, collate), consumer wait per batch, queue
// depth samples, bytes read, cache hits/misses, corrupt samples. Workers add
// to atomics once per batch (not per sample), so counting costs nothing
// measurable; `enabled = false` (--no-stats) skips even the clock reads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/statistics.h"

namespace mlbench::pipeline {

enum class Stage { Fetch = 0, Decode, Augment, Collate };
inline constexpr int kStages = 4;
const char* stage_name(Stage s);

// What one worker measured while building one batch; added to PipelineStats at once.
struct BatchCounters {
  std::int64_t busy_ns[kStages] = {0, 0, 0, 0};
  std::int64_t items[kStages] = {0, 0, 0, 0};
  std::int64_t bytes_read = 0;      // from storage (cache misses)
  std::int64_t bytes_cached = 0;    // served by the item cache
  std::int64_t corrupt = 0;
};

class PipelineStats {
 public:
  explicit PipelineStats(bool enabled = true) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }

  void add(const BatchCounters& c);
  // The consumer: seconds blocked for a batch, and how many batches were ready when it asked.
  void record_wait(double seconds, int ready_batches);
  void add_batch() { batches_.fetch_add(1, std::memory_order_relaxed); }
  // Read-ahead's I/O side (pipeline/read_ahead.h): one read of `ns` on an I/O
  // thread, overlapping the workers' decode (the workers' fetch stage is then
  // the time they waited for their reads).
  // `cpu_ns`: the I/O thread's own CPU time in that read (a request's hand-over; 0 where not
  // measured: local files).
  void add_io_read(std::int64_t ns, std::int64_t cpu_ns = 0) {
    io_read_ns_.fetch_add(ns, std::memory_order_relaxed);
    io_read_cpu_ns_.fetch_add(cpu_ns, std::memory_order_relaxed);
    io_reads_.fetch_add(1, std::memory_order_relaxed);
  }

  // Where a read-ahead request's cycle goes beside the read itself (threads engine; docs/pipeline.md,
  // "Read-ahead"): a queued read's wait for an I/O thread to start it, a read item's wait for its
  // worker to take it (the worker busy with another), and a worker's wake-up after the read it
  // waited on ended.
  void add_io_queue_wait(std::int64_t ns) {
    io_queue_wait_ns_.fetch_add(ns, std::memory_order_relaxed);
    io_queue_waits_.fetch_add(1, std::memory_order_relaxed);
  }
  void add_io_take(std::int64_t ns, bool waited) {
    auto& sum = waited ? io_wake_ns_ : io_item_wait_ns_;
    auto& count = waited ? io_wakes_ : io_item_waits_;
    sum.fetch_add(ns, std::memory_order_relaxed);
    count.fetch_add(1, std::memory_order_relaxed);
  }

  std::int64_t busy_ns(Stage s) const { return busy_ns_[static_cast<int>(s)].load(); }
  std::int64_t items(Stage s) const { return items_[static_cast<int>(s)].load(); }
  std::int64_t bytes_read() const { return bytes_read_.load(); }
  std::int64_t corrupt() const { return corrupt_.load(); }
  std::int64_t batches() const { return batches_.load(); }
  const core::StatAccumulator& wait() const { return wait_; }
  std::int64_t io_read_ns() const { return io_read_ns_.load(); }
  std::int64_t io_reads() const { return io_reads_.load(); }
  std::int64_t io_read_cpu_ns() const { return io_read_cpu_ns_.load(); }
  std::int64_t io_queue_wait_ns() const { return io_queue_wait_ns_.load(); }
  std::int64_t io_queue_waits() const { return io_queue_waits_.load(); }
  std::int64_t io_item_wait_ns() const { return io_item_wait_ns_.load(); }
  std::int64_t io_item_waits() const { return io_item_waits_.load(); }
  std::int64_t io_wake_ns() const { return io_wake_ns_.load(); }
  std::int64_t io_wakes() const { return io_wakes_.load(); }

  // The report's "pipeline" block (docs/pipeline.md). Extra context (source,
  // cache hits, workers, ...) is merged in by the Loader.
  nlohmann::json to_json() const;

 private:
  bool enabled_;
  std::atomic<std::int64_t> busy_ns_[kStages] = {};
  std::atomic<std::int64_t> items_[kStages] = {};
  std::atomic<std::int64_t> bytes_read_{0}, bytes_cached_{0}, corrupt_{0}, batches_{0};
  std::atomic<std::int64_t> io_read_ns_{0}, io_reads_{0}, io_read_cpu_ns_{0};
  std::atomic<std::int64_t> io_queue_wait_ns_{0}, io_queue_waits_{0}, io_item_wait_ns_{0}, io_item_waits_{0},
      io_wake_ns_{0}, io_wakes_{0};
  // Consumer-side: written by the one consumer thread only.
  core::StatAccumulator wait_{0};
  double queue_depth_sum_ = 0;
  int queue_depth_max_ = 0;
  long queue_depth_samples_ = 0;
};

}  // namespace mlbench::pipeline
