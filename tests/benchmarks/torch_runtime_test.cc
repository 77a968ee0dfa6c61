// benchmarks/support/torch_runtime: the allocator policy every benchmark runs
// under, read back from glibc's mallinfo2 (counts of bytes, no timing), and the
// intra-op workers' CPU binding, read back from each thread's affinity mask.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "benchmarks/support/torch_runtime.h"
#include "core/sysinfo.h"

using namespace mlbench::bench;
namespace core = mlbench::core;

namespace {
bool malloc_tuned_by_environment() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::string_view(tunables).find("glibc.malloc.") != std::string_view::npos) return true;
  for (const char* name : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

bool omp_binding_set_by_environment() {
  return std::getenv("OMP_PROC_BIND") || std::getenv("OMP_PLACES") || std::getenv("GOMP_CPU_AFFINITY");
}
}  // namespace

// What a training iteration frees stays in the heap for the next one: a 24 MiB
// tensor is carved from the heap (not a fresh mapping, faulted in page by page)
// and the heap keeps its pages after the tensor is freed (no trim). With glibc's
// defaults the tensor was mmapped: vae page-faulted on every iteration and ran
// slower than the same model in Python (docs/performance.md, "C++ vs Python at
// equal threads").
TEST(TorchRuntime, FreedTensorMemoryStaysInTheHeap) {
  if (malloc_tuned_by_environment()) {
    GTEST_SKIP() << "malloc is tuned by GLIBC_TUNABLES/MALLOC_*_: the policy is left to it";
  }
  core::BenchOptions options;
  options.cuda = false;
  make_torch_context(options);
  const auto before = mallinfo2();
  std::size_t heap_during = 0;
  {
    auto t = torch::ones({24 << 20}, torch::kUInt8);
    const auto during = mallinfo2();
    EXPECT_EQ(during.hblkhd, before.hblkhd) << "the 24 MiB tensor was mmapped, not taken from the heap";
    heap_during = during.arena;
    EXPECT_EQ(t.sum().item<std::int64_t>(), std::int64_t{24} << 20);
  }
  EXPECT_GE(mallinfo2().arena, heap_during) << "the heap was trimmed when the tensor was freed";
}

// The user's own malloc tuning wins over the policy.
TEST(TorchRuntime, MallocTunedByTheUserIsLeftAlone) {
  if (malloc_tuned_by_environment()) GTEST_SKIP() << "malloc is already tuned by the environment";
  ASSERT_EQ(setenv("MALLOC_TOP_PAD_", "65536", 1), 0);
  EXPECT_FALSE(keep_freed_memory());
  ASSERT_EQ(unsetenv("MALLOC_TOP_PAD_"), 0);
  ASSERT_EQ(setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1048576", 1), 0);
  EXPECT_FALSE(keep_freed_memory());
  ASSERT_EQ(unsetenv("GLIBC_TUNABLES"), 0);
  EXPECT_TRUE(keep_freed_memory());
}

// The intra-op workers are bound one CPU each, the calling thread is not, and a
// thread it starts afterwards (as the data loader's workers) gets the whole mask.
// Without the binding, under mlbench-run beside a busy loop on one CPU of the
// slot, both OpenMP threads ended up on the other CPU (docs/performance.md, "Stable numbers").
TEST(TorchRuntime, IntraOpWorkersAreBoundOneCpuEachAndTheCallerStaysFree) {
  if (omp_binding_set_by_environment()) GTEST_SKIP() << "OMP_PROC_BIND/OMP_PLACES/GOMP_CPU_AFFINITY set: left to them";
  const std::vector<int> whole = core::affinity_cpus();
  if (whole.size() < 2) GTEST_SKIP() << "this process may use " << whole.size() << " CPU: nothing to bind";
  torch::set_num_threads(2);
  // Unbound at first: every member may run on the whole mask.
  for (const auto& cpus : intra_op_affinity()) EXPECT_EQ(cpus, whole);
  const std::vector<int> bound = bind_intra_op_workers();
  ASSERT_EQ(bound.size(), 1u);
  EXPECT_EQ(bound[0], whole[1]);
  // A later region runs on the same team: member 1 keeps its one CPU, member 0 (this thread) the whole mask.
  const auto seen = intra_op_affinity();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], std::vector<int>{whole[1]});
  EXPECT_EQ(seen[0], whole);
  std::vector<int> started;
  std::thread t([&] { started = core::affinity_cpus(); });
  t.join();
  EXPECT_EQ(started, whole);
}

TEST(TorchRuntime, NothingIsBoundWithOneThreadOrWhenTheUserSetsOmpProcBind) {
  if (omp_binding_set_by_environment()) GTEST_SKIP() << "OMP_PROC_BIND/OMP_PLACES/GOMP_CPU_AFFINITY set: left to them";
  torch::set_num_threads(1);
  EXPECT_TRUE(bind_intra_op_workers().empty());
  ASSERT_EQ(setenv("OMP_PROC_BIND", "false", 1), 0);
  torch::set_num_threads(2);
  EXPECT_TRUE(bind_intra_op_workers().empty());
  ASSERT_EQ(unsetenv("OMP_PROC_BIND"), 0);
}
