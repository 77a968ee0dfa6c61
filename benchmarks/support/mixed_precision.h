// Mixed precision as every benchmark with an fp16 variant (convnet_fp16,
// wlmfp16) runs it, and the one vocabulary of the report's metrics.precision:
// "fp32"; "fp16-autocast" (CUDA: fp16 autocast with dynamic loss scaling,
// torch.cuda.amp's policy); "bf16-autocast" (CPU: bfloat16 autocast, no
// scaling since bfloat16 has fp32's range).
//
// The fp16 variant of a benchmark is its fp32 program run with mixed precision
// on: <name>/<name>.{h,cc} holds the program, compiled once into a library;
// <name>/main.cc and <name>_fp16/main.cc (wlmfp16/main.cc) call it with a
// ProgramVariant.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "benchmarks/support/autocast.h"
#include "benchmarks/support/loss_scaler.h"
#include "core/cli.h"

namespace mlbench::bench {

inline constexpr const char* kPrecisionFp32 = "fp32";
inline constexpr const char* kPrecisionFp16Autocast = "fp16-autocast";
inline constexpr const char* kPrecisionBf16Autocast = "bf16-autocast";

// metrics.precision of a run: kPrecisionFp32 unless `mixed`, then fp16 on CUDA, bf16 on the CPU.
const char* precision_name(bool mixed, bool cuda);

// Which executable runs a shared program: its name, whether mixed precision is
// always on (the fp16 variant), and its MLBENCH_SOURCE_HASH.
struct ProgramVariant {
  const char* name;
  bool mixed_precision;
  const char* source_hash;
};

// Adds --half ("mixed precision on") to the fp32 variant; the fp16 variant has it always on.
// `mixed` starts as the variant's mixed_precision.
void add_precision_flag(core::BenchCli& cli, const ProgramVariant& variant, bool& mixed);

// Divides the gradients of `params` by `scale` in place; true when one of them
// holds an inf or NaN. Multi-tensor ops (_foreach_mul_, and the max-abs norm of
// every gradient at once): a few kernel launches per step on a GPU instead of a
// handful per parameter, and one device-to-host read, as GradScaler's step.
bool unscale_gradients_and_check(const std::vector<torch::Tensor>& params, double scale);

// The mixed-precision side of a training step: the forward pass under
// autocast(), then backward(), which scales the loss and unscales and checks
// the gradients where fp16 needs it.
class MixedPrecision {
 public:
  // Throws core::UsageError where this LibTorch has no autocast for `device`.
  MixedPrecision(bool enabled, const torch::Device& device);

  bool enabled() const { return enabled_; }
  const char* name() const { return precision_name(enabled_, cuda_); }

  // The scope of the forward pass and its loss (a no-op in fp32).
  AutocastScope autocast() const { return AutocastScope(enabled_, cuda_); }

  // loss.backward(), scaled under fp16 loss scaling; then the gradients of
  // `params` unscaled in place. False when a gradient overflowed: the caller
  // skips the optimizer step (the scale has been halved).
  bool backward(const torch::Tensor& loss, const std::vector<torch::Tensor>& params);

  // metrics.precision; on CUDA fp16 metrics.loss_scale and metrics.skipped_steps;
  // on CPU bf16 metrics.cpu_native_bf16 (without AVX512-BF16/AMX-BF16 bf16 is emulated and slow).
  void report(nlohmann::json& metrics) const;

 private:
  bool enabled_;
  bool cuda_;
  std::optional<LossScaler> scaler_;  // fp16 on CUDA only
};

}  // namespace mlbench::bench
