// How many GPUs this machine has: one slot per GPU when there are any.
#pragma once

namespace mlbench::runner {

// The driver's /proc entries, else the "GPU n: ..." lines of `nvidia-smi -L` when
// nvidia-smi is on PATH; 0 without either.
int gpu_count();

}  // namespace mlbench::runner
