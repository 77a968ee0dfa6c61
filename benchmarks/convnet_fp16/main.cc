// convnet_fp16: convnet in mixed precision (Mila's convnet_fp16): CUDA fp16
// autocast with dynamic loss scaling, or bfloat16 autocast on the CPU.
#include "benchmarks/convnet/convnet.h"
#include "source_hash.h"

int main(int argc, char** argv) {
  return mlbench::bench::convnet_main(argc, argv, {"convnet_fp16", /*mixed_precision=*/true, MLBENCH_SOURCE_HASH});
}
