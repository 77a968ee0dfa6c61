// The LibTorch side of a benchmark: threads, seed, device, synchronisation,
// and the entry point every benchmark's main() calls.
#pragma once

#include <functional>

#include <torch/torch.h>

#include "core/benchmark_run.h"
#include "core/cli.h"

namespace mlbench::bench {

struct TorchContext {
  torch::Device device = torch::kCPU;
  core::RuntimeInfo runtime;
  core::Chrono::SyncHook sync;  // cuda synchronize on CUDA, empty on CPU
};

// Keeps the memory a training iteration frees in the process heap for the next
// iteration (glibc malloc: blocks up to 32 MiB from the heap, a trim threshold of
// 1 GiB). glibc's default returns the heap's free top to the kernel whenever it
// passes twice the (dynamic) mmap threshold, so every iteration page-faulted its
// tensors back in: vae spent more time in page faults than in its matrix
// products (docs/performance.md, "C++ vs Python at equal threads"). Does
// nothing when the user tunes malloc through GLIBC_TUNABLES or MALLOC_*_.
// Returns whether the policy was applied.
bool keep_freed_memory();

// Sets intra-op (and the BLAS's own) threads to --cpu-cores, seeds torch, keeps freed
// memory (above), picks the device
// (--cuda/--no-cuda, default CUDA when available). Throws core::UsageError for
// --cuda without CUDA.
TorchContext make_torch_context(const core::BenchOptions& options);

// main() of a benchmark after parsing: builds the context, then runs
// `setup(context)` and its loop under core::BenchmarkRun. Returns the exit code.
// A --batch-size above 8 on the CPU is first checked against the memory this process
// may use (core/memory_budget.h): set-up plus one step at batch 2 (and 8 when needed)
// in a forked child, extrapolated; one that cannot fit ends in a FAIL report saying so.
int run_benchmark(const core::BenchCli& cli, const char* source_hash,
                  const std::function<core::Workload(const TorchContext&)>& setup);

// A tensor's scalar value as a deferred loss (read at the end of the observation).
inline std::function<double()> deferred_loss(const torch::Tensor& loss) {
  return [l = loss.detach()] { return l.item<double>(); };
}

}  // namespace mlbench::bench
