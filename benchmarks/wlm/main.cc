// wlm: the word language model benchmark in float32;
// the model and loop live in benchmarks/common/word_lm.cc, shared with wlmfp16.
#include "benchmarks/common/word_lm.h"
#include "source_hash.h"

int main(int argc, char** argv) { return mlbench::bench::word_lm_main(argc, argv, /*mixed_precision=*/false, MLBENCH_SOURCE_HASH); }
