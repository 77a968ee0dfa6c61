// convnet and convnet_fp16 share one training program (compiled once into
// mlbench_convnet): ResNet on ImageNet-like images, SGD with momentum,
// cross-entropy. convnet_fp16 is the same program with mixed precision on
// (the pattern of support/mixed_precision.h).
#pragma once

#include "benchmarks/support/mixed_precision.h"

namespace mlbench::bench {

int convnet_main(int argc, char** argv, const ProgramVariant& variant);

}  // namespace mlbench::bench
