// wlmfp16: the word language model benchmark in mixed precision (fp16 + loss scaling on CUDA, bf16 on CPU);
// the model and loop live in benchmarks/common/word_lm.cc, shared with wlm.
#include "benchmarks/common/word_lm.h"
#include "source_hash.h"

int main(int argc, char** argv) { return mlbench::bench::word_lm_main(argc, argv, /*mixed_precision=*/true, MLBENCH_SOURCE_HASH); }
