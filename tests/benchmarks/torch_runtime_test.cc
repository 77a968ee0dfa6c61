// benchmarks/support/torch_runtime: the allocator policy every benchmark runs
// under, read back from glibc's mallinfo2 (counts of bytes, no timing).
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <torch/torch.h>

#include "benchmarks/support/torch_runtime.h"

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
}  // namespace

// What a training iteration frees stays in the heap for the next one: a 24 MiB
// tensor is carved from the heap (not a fresh mapping, faulted in page by page)
// and the heap keeps its pages after the tensor is freed (no trim). With glibc's
// defaults the tensor was mmapped: vae page-faulted ~1300 times an iteration and
// ran at 0.7x the same model in Python.
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
