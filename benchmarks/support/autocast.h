// Mixed precision for a forward pass and its loss, as torch.autocast(device,
// dtype): fp16 on CUDA, bfloat16 on the CPU. LibTorch has no C++ guard object,
// so this scope sets and restores the autocast state itself. LibTorch 2.4
// replaced the per-device setters (set_enabled, set_cpu_enabled,
// set_autocast_gpu_dtype, ...) by ones that take the device type; both build.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define MLBENCH_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace mlbench::bench {

class AutocastScope {
 public:
  AutocastScope(bool enabled, bool cuda) : enabled_(enabled), cuda_(cuda) {
    if (!enabled_) return;
    set(true);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set(false);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  void set(bool on) const {
#ifdef MLBENCH_AUTOCAST_BY_DEVICE_TYPE
    const auto type = cuda_ ? at::kCUDA : at::kCPU;
    if (on) at::autocast::set_autocast_dtype(type, cuda_ ? at::kHalf : at::kBFloat16);
    at::autocast::set_autocast_enabled(type, on);
#else
    if (cuda_) {
      if (on) at::autocast::set_autocast_gpu_dtype(at::kHalf);
      at::autocast::set_enabled(on);
    } else {
      if (on) at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(on);
    }
#endif
  }

  bool enabled_, cuda_;
};

}  // namespace mlbench::bench
