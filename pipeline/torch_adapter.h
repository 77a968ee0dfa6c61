// The pipeline's one LibTorch adapter: a Batch as tensors (zero-copy over the
// batch buffer), and a host allocator that hands out pinned memory when CUDA
// is present so the copy to the device can be asynchronous.
#pragma once

#include <torch/torch.h>

#include "pipeline/loader.h"

namespace mlbench::pipeline {

// Pinned host memory (page-locked, via a pinned torch tensor) when CUDA is
// available, else the default allocator.
HostAllocator torch_host_allocator();

struct BatchTensors {
  torch::Tensor data;    // N x C x H x W, float32 or uint8, over the batch's buffer
  torch::Tensor labels;  // N, int64
};
BatchTensors to_tensors(const Batch& batch);

}  // namespace mlbench::pipeline
