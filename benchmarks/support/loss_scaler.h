// Dynamic loss scaling for fp16 training (the policy of torch.cuda.amp's
// GradScaler): multiply the loss by `scale`, skip the step and halve the scale
// when a gradient overflowed, double it after `growth_interval` clean steps.
// Framework-free so the policy is unit-tested; wlmfp16 applies it to tensors.
#pragma once

namespace mlbench::bench {

class LossScaler {
 public:
  explicit LossScaler(double initial_scale = 65536.0, int growth_interval = 2000, double growth = 2.0,
                      double backoff = 0.5)
      : scale_(initial_scale), growth_interval_(growth_interval), growth_(growth), backoff_(backoff) {}

  double scale() const { return scale_; }
  long skipped_steps() const { return skipped_; }

  // Records one step's outcome; returns whether the optimizer should step.
  bool update(bool found_inf) {
    if (found_inf) {
      scale_ *= backoff_;
      clean_ = 0;
      ++skipped_;
      return false;
    }
    if (++clean_ >= growth_interval_) {
      scale_ *= growth_;
      clean_ = 0;
    }
    return true;
  }

 private:
  double scale_;
  int growth_interval_;
  double growth_;
  double backoff_;
  int clean_ = 0;
  long skipped_ = 0;
};

}  // namespace mlbench::bench
