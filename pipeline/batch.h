// What the image loader hands the consumer: one contiguous N x C x H x W
// buffer (from the host buffer pool) and its int64 labels.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/buffer_pool.h"
#include "pipeline/transforms.h"

namespace mlbench::pipeline {

struct Batch {
  HostBuffer data;                // N x C x H x W, float32 or uint8
  std::vector<std::int64_t> labels;
  int size = 0, channels = 3, height = 0, width = 0;
  OutputType type = OutputType::Float32;
  long epoch = 0;
  long index = 0;                 // batch number within the epoch
  long sequence = 0;              // batch number over the run
  const float* floats() const { return static_cast<const float*>(data.data); }
  const std::uint8_t* bytes() const { return static_cast<const std::uint8_t*>(data.data); }
};

}  // namespace mlbench::pipeline
