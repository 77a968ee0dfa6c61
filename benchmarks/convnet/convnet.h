// convnet and convnet_fp16 share one training program (compiled once into
// mlbench_convnet): ResNet on ImageNet-like images, SGD with momentum,
// cross-entropy. convnet_fp16 is the same program with mixed precision on.
#pragma once

namespace mlbench::bench {

// `name`: the benchmark's name; `half`: mixed precision always on (convnet_fp16).
int convnet_main(int argc, char** argv, const char* name, bool half, const char* source_hash);

}  // namespace mlbench::bench
