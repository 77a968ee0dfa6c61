// The image transforms, with torchvision's semantics (docs/pipeline.md lists
// the differences): RandomResizedCrop geometry, Resize+CenterCrop geometry,
// crop-and-resize (OpenCV), horizontal flip and Normalize fused into the
// collate step that writes a sample's CHW slot in the batch. Pure functions,
// and the one struct that picks among them (TransformConfig).
#pragma once

#include <array>
#include <cstdint>

#include "core/rng.h"
#include "pipeline/jpeg_decoder.h"

namespace mlbench::pipeline {

// One generator per sample (seeded from the run seed, epoch and position).
using Rng = core::Rng;

struct RandomResizedCropParams {
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
};

// torchvision.transforms.RandomResizedCrop.get_params: 10 tries of a random
// area share and log-uniform aspect ratio, else the centred crop of the whole
// image with its ratio clamped into [ratio_min, ratio_max].
CropBox random_resized_crop_box(int width, int height, const RandomResizedCropParams& p, Rng& rng);

// Resize(resize_to) (shorter side to resize_to) then CenterCrop(crop), as one
// box in source pixels (rounded to whole pixels).
CropBox center_crop_box(int width, int height, int resize_to, int crop);

// Resizes the `box` region of an interleaved `channels`-channel image (1, 3,
// or 4: RGBX) to out_w x out_h (bilinear, cv::resize INTER_LINEAR) into `dst`
// (HWC uint8, `channels` bytes a pixel).
void resize_crop(const std::uint8_t* src, int width, int height, int channels, const CropBox& box, int out_w,
                 int out_h, std::uint8_t* dst);

// Normalize: out = (x / 255 - mean) / std per channel (ImageNet by default).
struct Normalize {
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

// HWC uint8 -> CHW float32 normalised, mirrored left-right when `flip`.
// `channels` planes are written; a source pixel has `src_channels` bytes
// (0: `channels`; 4 with channels 3: RGBX, the 4th byte ignored).
void collate_chw_float(const std::uint8_t* hwc, int width, int height, int channels, bool flip, const Normalize& norm,
                       float* dst, int src_channels = 0);
// HWC uint8 -> CHW uint8 (normalise later on the device), mirrored when `flip`.
void collate_chw_uint8(const std::uint8_t* hwc, int width, int height, int channels, bool flip, std::uint8_t* dst,
                       int src_channels = 0);

enum class OutputType { Float32, Uint8 };
enum class TransformMode { Train, Eval };

// Which transforms a loader applies to every image, and the batch's element type.
struct TransformConfig {
  TransformMode mode = TransformMode::Train;
  int image_size = 224;           // output height = width
  int resize_size = 256;          // Eval: Resize(resize_size) before CenterCrop(image_size)
  RandomResizedCropParams crop;   // Train
  bool flip = true;               // Train: RandomHorizontalFlip(p=0.5)
  Normalize normalize;            // Float32 output only
  OutputType output = OutputType::Float32;
  // --decode gpu: the CPU stages stop after the fetch and the JPEG header (the crop
  // box and flip are drawn from it as above); the batch carries each sample's JPEG
  // bytes (Batch::encoded) for the device to decode, crop, resize, flip and
  // normalise (benchmarks/support/gpu_decode.h). JPEG sources only.
  bool decode_on_device = false;
};

}  // namespace mlbench::pipeline
