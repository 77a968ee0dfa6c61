// What the image loader hands the consumer: one contiguous N x C x H x W
// buffer (from the host buffer pool) and its int64 labels.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/buffer_pool.h"
#include "pipeline/transforms.h"

namespace mlbench::pipeline {

// Under --decode gpu, a sample as the CPU leaves it: its JPEG bytes, its size
// from the header, and the crop and flip its augmentation drew (the same draws
// as the CPU path's for the same seed, epoch and position).
struct EncodedSample {
  std::vector<std::uint8_t> jpeg;
  int width = 0, height = 0;  // the full image, from the header
  CropBox box;                // in source pixels
  bool flip = false;
};

struct Batch {
  HostBuffer data;                // N x C x H x W, float32 or uint8
  std::vector<std::int64_t> labels;
  int size = 0, channels = 3, height = 0, width = 0;
  OutputType type = OutputType::Float32;
  long epoch = 0;
  long index = 0;                 // batch number within the epoch
  long sequence = 0;              // batch number over the run
  // --decode gpu (TransformConfig::decode_on_device): one per sample; `data` holds no pixels.
  std::vector<EncodedSample> encoded;
  const float* floats() const { return static_cast<const float*>(data.data); }
  const std::uint8_t* bytes() const { return static_cast<const std::uint8_t*>(data.data); }
};

}  // namespace mlbench::pipeline
