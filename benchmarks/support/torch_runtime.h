// The LibTorch side of a benchmark: threads, seed, device, synchronisation,
// and the entry point every benchmark's main() calls.
#pragma once

#include <functional>
#include <vector>

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

// Binds LibTorch's intra-op (OpenMP) worker threads, team members 1..n-1, each to
// one CPU of this process's affinity mask (member k to its k-th CPU), and leaves
// the calling thread, and so every thread it starts later (the data loader's),
// free on the whole mask. Without it, when another process took one CPU of a
// 2-CPU slot, Linux's load balancer moved both OpenMP threads of a benchmark in
// its slot's cgroup onto the other CPU, where every barrier waits for a thread
// that spins on the same CPU, so a benchmark beside a one-CPU busy loop lost far more
// under mlbench-run than outside a cgroup (docs/performance.md, "Stable numbers").
// OMP_PROC_BIND=true would bind the calling thread too, and with it the loader's
// threads. Binds nothing with one thread, with more threads than CPUs, or when
// the user set OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY (OMP_PROC_BIND=false
// turns this off). Returns the CPU of each member bound (index k-1 for member k).
std::vector<int> bind_intra_op_workers();

// The CPUs each intra-op team member may run on now (index k: member k; member
// 0 is the calling thread), read inside one OpenMP region of the whole team.
std::vector<std::vector<int>> intra_op_affinity();

// Sets intra-op (and the BLAS's own) threads to --cpu-cores, binds the intra-op workers (above), seeds torch, keeps
// freed memory (above), picks the device
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
