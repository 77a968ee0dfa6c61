// NVTX ranges (--nvtx): the pipeline's stages on their worker threads and the
// train loop's phases (wait, h2d, compute) on the main thread, named as in the
// Perfetto trace, so that `nsys profile` shows where a step waits. NVTX3 is
// header-only (the CUDA toolkit's nvtx3/nvToolsExt.h): without a tool attached
// a push is one call that returns; the build compiles it in only where the
// header is found (MLBENCH_WITH_NVTX), else the ranges are no-ops and --nvtx
// says so. Off unless enabled: a disabled range reads one atomic flag.
#pragma once

#include <atomic>

namespace mlbench::core::nvtx {

// Whether this build has NVTX (the header was found at configure time).
bool available();
// --nvtx: ranges on from now on (a no-op without NVTX).
void enable(bool on);
inline std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> on{false};
  return on;
}
inline bool enabled() {
  return enabled_flag().load(std::memory_order_relaxed);
}
void push(const char* name);
void pop();

// A range for the scope, when enabled.
class Range {
 public:
  explicit Range(const char* name) : on_(enabled()) {
    if (on_) push(name);
  }
  ~Range() {
    if (on_) pop();
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  bool on_;
};

}  // namespace mlbench::core::nvtx
