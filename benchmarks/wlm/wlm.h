// wlm and wlmfp16 share one training program (compiled once into mlbench_wlm):
// PyTorch's word_language_model example — 2-layer GRU (or LSTM) of 656 units,
// tied embedding/decoder weights, BPTT 35, SGD lr 20 with gradient clipping
// 0.25 — over a wikitext-2 layout corpus. wlmfp16 is the same program with
// mixed precision on (the pattern of support/mixed_precision.h).
#pragma once

#include "benchmarks/support/mixed_precision.h"

namespace mlbench::bench {

int wlm_main(int argc, char** argv, const ProgramVariant& variant);

}  // namespace mlbench::bench
