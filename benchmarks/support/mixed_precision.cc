#include "benchmarks/support/mixed_precision.h"

#include <fstream>
#include <limits>

#include "core/benchmark_run.h"

namespace mlbench::bench {

namespace {

bool cpu_has_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) return line.find(" " + flag) != std::string::npos;
  }
  return false;
}

}  // namespace

bool unscale_gradients_and_check(const std::vector<torch::Tensor>& params, double scale) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined() && p.grad().numel() > 0) grads.push_back(p.grad());
  }
  if (grads.empty()) return false;
  if (grads.front().is_cuda() && grads.front().scalar_type() == torch::kFloat32) {
    // On a GPU: GradScaler's fused kernel (one launch for every gradient; it has no
    // CPU kernel in LibTorch 1.13, hence the two multi-tensor ops below).
    const auto opts = grads.front().options();
    auto found_inf = torch::zeros({1}, opts);
    const auto inv_scale = torch::full({1}, 1.0 / scale, opts);
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
    return found_inf.item<float>() != 0.0f;
  }
  at::_foreach_mul_(grads, 1.0 / scale);
  // The largest |g| of each gradient: inf or NaN exactly when the gradient holds one
  // (a max cannot overflow where an L2 norm of large finite values could).
  const auto max_abs = at::_foreach_norm(grads, std::numeric_limits<double>::infinity());
  return !torch::stack(max_abs).isfinite().all().item<bool>();
}

const char* precision_name(bool mixed, bool cuda) {
  if (!mixed) return kPrecisionFp32;
  return cuda ? kPrecisionFp16Autocast : kPrecisionBf16Autocast;
}

void add_precision_flag(core::BenchCli& cli, const ProgramVariant& variant, bool& mixed) {
  mixed = variant.mixed_precision;
  if (variant.mixed_precision) return;
  cli.add_flag("--half", mixed, "Mixed precision: CUDA fp16 autocast + loss scaling, CPU bfloat16 autocast");
}

MixedPrecision::MixedPrecision(bool enabled, const torch::Device& device) : enabled_(enabled), cuda_(device.is_cuda()) {
#if !defined(TORCH_VERSION_MAJOR) || (TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR < 10)
  if (enabled_ && !cuda_)
    throw core::UsageError("this LibTorch has no CPU autocast (bf16 needs >= 1.10); use a CUDA device");
#endif
  // Loss scaling only where it is needed: fp16 on CUDA.
  if (enabled_ && cuda_) scaler_.emplace();
}

bool MixedPrecision::backward(const torch::Tensor& loss, const std::vector<torch::Tensor>& params) {
  if (!scaler_) {
    loss.backward();
    return true;
  }
  (loss * scaler_->scale()).backward();
  return scaler_->update(unscale_gradients_and_check(params, scaler_->scale()));
}

void MixedPrecision::report(nlohmann::json& metrics) const {
  metrics["precision"] = name();
  if (enabled_ && !cuda_) metrics["cpu_native_bf16"] = cpu_has_flag("avx512_bf16") || cpu_has_flag("amx_bf16");
  if (scaler_) {
    metrics["loss_scale"] = scaler_->scale();
    metrics["skipped_steps"] = scaler_->skipped_steps();
  }
}

}  // namespace mlbench::bench
