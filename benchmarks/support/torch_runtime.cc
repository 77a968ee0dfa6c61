#include "benchmarks/support/torch_runtime.h"

#include <malloc.h>

#include <cstdlib>
#include <iostream>
#include <string_view>

namespace mlbench::bench {

bool keep_freed_memory() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::string_view(tunables).find("glibc.malloc.") != std::string_view::npos) return false;
  for (const char* name : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"}) {
    if (std::getenv(name)) return false;
  }
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit; larger
  // tensors are still mapped (and faulted in) per allocation.
  constexpr int kMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 1 << 30;
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
}

TorchContext make_torch_context(const core::BenchOptions& options) {
  TorchContext ctx;
  keep_freed_memory();
  torch::set_num_threads(options.cpu_cores);
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
