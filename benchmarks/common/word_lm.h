// The word language model benchmark shared by wlm (fp32) and wlmfp16 (mixed
// precision): PyTorch's word_language_model example — 2-layer GRU (or LSTM)
// of 656 units, tied embedding/decoder weights, BPTT 35, SGD lr 20 with
// gradient clipping 0.25 — over a wikitext-2 layout corpus.
#pragma once

namespace mlbench::bench {

// main() of wlm (mixed_precision false) and wlmfp16 (true). On CUDA, fp16
// autocast with dynamic loss scaling; on CPU, bf16 autocast.
int word_lm_main(int argc, char** argv, bool mixed_precision, const char* source_hash);

}  // namespace mlbench::bench
