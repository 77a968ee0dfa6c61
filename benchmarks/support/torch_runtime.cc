#include "benchmarks/support/torch_runtime.h"

#include <iostream>

#include "core/blas.h"

namespace mlbench::bench {

TorchContext make_torch_context(const core::BenchOptions& options) {
  TorchContext ctx;
  torch::set_num_threads(options.cpu_cores);
  core::set_blas_threads(options.cpu_cores);  // a pthread OpenBLAS keeps its own pool (core/blas.h)
  torch::manual_seed(static_cast<uint64_t>(options.seed));
  const bool cuda_available = torch::cuda::is_available();
  if (options.cuda.value_or(false) && !cuda_available) {
    throw core::UsageError("--cuda given but this LibTorch has no usable CUDA device (use --no-cuda)");
  }
  const bool use_cuda = options.cuda.value_or(cuda_available);
  ctx.runtime.framework = "libtorch";
  ctx.runtime.framework_version = TORCH_VERSION;
  ctx.runtime.cuda_available = cuda_available;
  if (use_cuda) {
    ctx.device = torch::Device(torch::kCUDA, 0);
    ctx.runtime.device = "cuda:0";
    ctx.sync = [] { torch::cuda::synchronize(); };
  }
  return ctx;
}

int run_benchmark(const core::BenchCli& cli, const char* source_hash,
                  const std::function<core::Workload(const TorchContext&)>& setup) {
  TorchContext ctx;
  try {
    ctx = make_torch_context(cli.options());
  } catch (const core::UsageError& e) {
    std::cerr << cli.options().name << ": error: " << e.what() << "\n";
    return 2;
  }
  core::BenchmarkRun run(cli, source_hash, ctx.runtime, ctx.sync);
  return run.run([&] { return setup(ctx); });
}

}  // namespace mlbench::bench
