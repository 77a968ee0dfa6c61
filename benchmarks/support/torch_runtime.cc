#include "benchmarks/support/torch_runtime.h"

#include <pthread.h>
#include <sched.h>

#include <ATen/Parallel.h>

#include "benchmarks/support/device_copy.h"
#include "core/sysinfo.h"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string_view>
#include <thread>

#include "core/memory_budget.h"
#include "core/train_loop.h"

#include "core/blas.h"
#include "pipeline/remedies/coordinated.h"

namespace mlbench::bench {

namespace {

// Batch sizes of the memory probes; a run at or below the larger needs no extrapolation.
constexpr int kProbeSmall = 2;
constexpr int kProbeLarge = 8;
// A probe that takes longer is abandoned (the run goes ahead unchecked).
constexpr std::chrono::seconds kProbeTimeout{120};

// Set-up plus one step at `batch_size` in a forked child (the parent allocates nothing
// and keeps its RNG state); its peak resident growth, nullopt when the probe failed.
std::optional<core::StepMemory> probe_step(const core::BenchCli& cli, const TorchContext& ctx,
                                           const std::function<core::Workload(const TorchContext&)>& setup,
                                           int batch_size) {
  const std::uint64_t before = core::resident_bytes();
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid < 0) return std::nullopt;
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    try {
      // Only this child's copy of the options changes (BenchCli objects are not const in main).
      const_cast<core::BenchCli&>(cli).options().batch_size = batch_size;
      // The probe's loader stays out of a --coordinated group (pipeline/remedies/coordinated.h).
      ::setenv(pipeline::kNoCoordinationEnv, "1", 1);
      core::Workload work = setup(ctx);
      core::LoopResult result;
      core::TrainLoop(core::LoopConfig{}).run(work.step, result);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  rusage usage{};
  const auto deadline = std::chrono::steady_clock::now() + kProbeTimeout;
  pid_t done = 0;
  while ((done = ::wait4(pid, &status, WNOHANG, &usage)) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::wait4(pid, &status, 0, &usage);
    return std::nullopt;
  }
  if (done != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  const std::uint64_t peak = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  return core::StepMemory{batch_size, peak > before ? peak - before : 0};
}

// Refuses (std::runtime_error: a FAIL report with the numbers) a --batch-size whose
// extrapolated memory exceeds what this process may use, before anything allocates it.
void check_batch_memory(const core::BenchCli& cli, const TorchContext& ctx,
                        const std::function<core::Workload(const TorchContext&)>& setup) {
  const int batch = cli.options().batch_size;
  // Device memory is not resident memory: only host runs are checked.
  if (batch <= kProbeLarge || ctx.device.is_cuda()) return;
  const core::MemoryLimit limit = core::memory_limit();
  const std::uint64_t resident = core::resident_bytes();
  const auto small = probe_step(cli, ctx, setup, kProbeSmall);
  if (!small || limit.bytes == 0) return;
  // The small probe's growth per sample bounds the true one (it includes the fixed cost),
  // when it grew at all: a step that grew by nothing measurable bounds nothing.
  const double bound = static_cast<double>(resident) +
                       static_cast<double>(small->growth_bytes) / kProbeSmall * static_cast<double>(batch);
  if (small->growth_bytes > 0 && bound <= static_cast<double>(limit.bytes)) return;
  auto lower = small;
  auto large = probe_step(cli, ctx, setup, kProbeLarge);
  if (!large) return;
  // A small model's step grows by less than the resident set's granularity at 8 samples (toy_reg:
  // no slope, and 2^31 samples went ahead to the OOM killer): probe batches 16 times larger
  // until the growth shows. Each is safe to run: at 16 times a batch that grew by nothing
  // measurable, a step grows by a few MiB at most.
  while (core::bytes_per_sample(*lower, *large) <= 0.0 && large->batch_size < batch / 16 &&
         large->batch_size <= (1 << 26)) {
    auto next = probe_step(cli, ctx, setup, large->batch_size * 16);
    if (!next) return;
    lower = large;
    large = next;
  }
  if (auto refusal = core::batch_memory_refusal(*lower, *large, batch, resident, limit)) {
    throw std::runtime_error(*refusal);
  }
}

}  // namespace

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

std::vector<std::vector<int>> intra_op_affinity() {
  const int threads = torch::get_num_threads();
  std::vector<std::vector<int>> out(static_cast<std::size_t>(threads));
  at::parallel_for(0, threads, 1, [&](std::int64_t begin, std::int64_t end) {
    // core::affinity_cpus reads sched_getaffinity(0): the calling thread's mask.
    if (begin + 1 == end) out[static_cast<std::size_t>(at::get_thread_num())] = core::affinity_cpus();
  });
  return out;
}

std::vector<int> bind_intra_op_workers() {
  for (const char* name : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"}) {
    if (std::getenv(name)) return {};
  }
  const int threads = torch::get_num_threads();
  if (threads < 2) return {};
  const std::vector<int> cpus = core::affinity_cpus();
  if (threads > static_cast<int>(cpus.size())) return {};
  // One chunk per team member: member k runs [k, k+1) (ATen's OpenMP parallel_for).
  std::vector<int> bound(static_cast<std::size_t>(threads - 1), -1);
  at::parallel_for(0, threads, 1, [&](std::int64_t begin, std::int64_t end) {
    const int member = at::get_thread_num();
    if (member == 0 || begin + 1 != end) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<std::size_t>(member)], &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0) {
      bound[static_cast<std::size_t>(member - 1)] = cpus[static_cast<std::size_t>(member)];
    }
  });
  std::erase(bound, -1);
  return bound;
}

namespace {

// `bind`: bind the intra-op workers now. Binding runs a parallel region, which starts
// libgomp's thread team, and a process forked after that hangs in its first parallel
// region (libgomp's team is not fork-safe: the child waits on threads it does not have):
// run_benchmark binds only after the memory probe's fork.
TorchContext make_context(const core::BenchOptions& options, bool bind) {
  TorchContext ctx;
  keep_freed_memory();
  torch::set_num_threads(options.cpu_cores);
  if (bind) bind_intra_op_workers();
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

}  // namespace

TorchContext make_torch_context(const core::BenchOptions& options) { return make_context(options, true); }

int run_benchmark(const core::BenchCli& cli, const char* source_hash,
                  const std::function<core::Workload(const TorchContext&)>& setup) {
  TorchContext ctx;
  try {
    ctx = make_context(cli.options(), /*bind=*/false);
  } catch (const core::UsageError& e) {
    std::cerr << cli.options().name << ": error: " << e.what() << "\n";
    return 2;
  }
  core::BenchmarkRun run(cli, source_hash, ctx.runtime, ctx.sync);
  return run.run([&] {
    check_batch_memory(cli, ctx, setup);  // may fork: before any parallel region
    bind_intra_op_workers();
    core::Workload work = setup(ctx);
    // On a GPU the phases are the device's times, from events (no sync inside an observation).
    if (ctx.device.is_cuda() && cli.options().device_events) work.device_timeline = make_cuda_timeline();
    return work;
  });
}

}  // namespace mlbench::bench
