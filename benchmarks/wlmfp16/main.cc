// wlmfp16: the word language model benchmark in mixed precision (CUDA fp16
// autocast with dynamic loss scaling, or bfloat16 autocast on the CPU). The
// program lives in benchmarks/wlm/wlm.cc, shared with wlm.
#include "benchmarks/wlm/wlm.h"
#include "source_hash.h"

int main(int argc, char** argv) {
  return mlbench::bench::wlm_main(argc, argv, {"wlmfp16", /*mixed_precision=*/true, MLBENCH_SOURCE_HASH});
}
