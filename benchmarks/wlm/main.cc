// wlm: the word language model benchmark in fp32, or with --half in mixed
// precision. The program lives in wlm.cc, shared with wlmfp16.
#include "benchmarks/wlm/wlm.h"
#include "source_hash.h"

int main(int argc, char** argv) {
  return mlbench::bench::wlm_main(argc, argv, {"wlm", /*mixed_precision=*/false, MLBENCH_SOURCE_HASH});
}
