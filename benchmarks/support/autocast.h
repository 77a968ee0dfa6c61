// Mixed precision for a forward pass and its loss, as torch.autocast(device,
// dtype): fp16 on CUDA, bfloat16 on the CPU. LibTorch 1.13 has no C++ guard
// object, so this scope sets and restores the autocast state itself.
#pragma once

#include <ATen/autocast_mode.h>

namespace mlbench::bench {

class AutocastScope {
 public:
  AutocastScope(bool enabled, bool cuda) : enabled_(enabled), cuda_(cuda) {
    if (!enabled_) return;
    if (cuda_) {
      at::autocast::set_autocast_gpu_dtype(at::kHalf);
      at::autocast::set_enabled(true);
    } else {
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(true);
    }
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    if (cuda_) {
      at::autocast::set_enabled(false);
    } else {
      at::autocast::set_cpu_enabled(false);
    }
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_, cuda_;
};

}  // namespace mlbench::bench
