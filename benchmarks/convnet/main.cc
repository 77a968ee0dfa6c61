// convnet: ResNet-18/34/50/101/152 image classification (Mila's convnet), in
// fp32, or with --half in mixed precision. The program lives in convnet.cc.
#include "benchmarks/convnet/convnet.h"
#include "source_hash.h"

int main(int argc, char** argv) {
  return mlbench::bench::convnet_main(argc, argv, {"convnet", /*mixed_precision=*/false, MLBENCH_SOURCE_HASH});
}
