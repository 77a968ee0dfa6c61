// Whether a batch size fits in memory, decided before a benchmark allocates it
// (docs/reliability.md, fault 11): a huge --batch-size used to allocate until the kernel's
// OOM killer struck, with no message and no report. The growth of resident memory
// of one training step at two small batch sizes is extrapolated linearly to the
// requested one and compared with the memory this process may use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mlbench::core {

// Peak resident-memory growth of set-up plus one step at `batch_size`.
struct StepMemory {
  int batch_size = 0;
  std::uint64_t growth_bytes = 0;
};

// The memory a process may use, and where the figure comes from.
struct MemoryLimit {
  std::uint64_t bytes = 0;
  std::string source;  // "cgroup memory limit" or "available memory (MemAvailable)"
};

// Bytes per sample from two probes (`larger` at the larger batch); 0 when the larger
// batch grew no more than the smaller (noise: the slope is not measurable).
double bytes_per_sample(const StepMemory& small, const StepMemory& larger);

// Growth a run at `batch_size` needs: the larger probe's plus the slope for the rest.
std::uint64_t extrapolated_growth(const StepMemory& small, const StepMemory& larger, int batch_size);

// The one-line refusal when `resident_bytes` (now) + the extrapolated growth exceeds
// `limit`; nullopt when it fits.
std::optional<std::string> batch_memory_refusal(const StepMemory& small, const StepMemory& larger, int batch_size,
                                                std::uint64_t resident_bytes, const MemoryLimit& limit);

// This process's resident set (VmRSS), 0 when unreadable.
std::uint64_t resident_bytes();

// What this process may use: its cgroup's memory limit (v1 or v2) when set, else the
// machine's MemAvailable plus what the process already holds; the smaller of both.
MemoryLimit memory_limit();

}  // namespace mlbench::core
