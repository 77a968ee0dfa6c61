// --decode gpu: a batch's JPEGs decoded on the CUDA device by nvJPEG's batched
// decoder, then cropped, resized (bilinear), flipped and normalised there in a
// few batched kernels. The loader's CPU workers only read each sample and parse
// its header, drawing the same crop box and flip as the CPU path would
// (pipeline::EncodedSample); which nvJPEG backend runs the Huffman stage
// (the GPU's JPEG engine, the GPU, or the consumer's CPU thread) is reported.
//
// nvJPEG is loaded at run time (as NVML is): MLBENCH_NVJPEG names the library,
// else libnvjpeg.so.{13,12,11} on the loader's path, else a copy beside the
// LibTorch this process runs (a CUDA PyTorch's nvidia/*/lib, torchvision.libs)
// or in /usr/local/cuda. A build or machine without it fails at start with one
// line naming what was looked for.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "benchmarks/support/device_copy.h"
#include "pipeline/batch.h"
#include "pipeline/transforms.h"

namespace mlbench::bench {

// The geometry half of the GPU path, on any device: `canvas` [N, 3, H, W] uint8
// holds image i in its top-left samples[i].height x samples[i].width corner;
// returns [N, 3, size, size] float32, each image's box resized to size x size
// as cv::resize INTER_LINEAR does (pixel centres aligned, the box's edge pixels
// repeated outside it), rounded to whole levels as the CPU path's uint8 resize
// is, mirrored when the sample's flip is set, then normalised
// ((x / 255 - mean) / std). Pure: the CPU tests check it against the CPU path.
torch::Tensor crop_resize_normalize(const torch::Tensor& canvas, const std::vector<pipeline::EncodedSample>& samples,
                                    int size, const pipeline::Normalize& normalize);

class GpuJpegDecoder {
 public:
  // backend: "auto", "hardware", "gpu-hybrid" or "hybrid" (--nvjpeg-backend).
  // Throws std::runtime_error when nvJPEG cannot be loaded or initialised.
  GpuJpegDecoder(torch::Device device, int image_size, pipeline::Normalize normalize, std::string backend = "auto");
  ~GpuJpegDecoder();
  GpuJpegDecoder(const GpuJpegDecoder&) = delete;
  GpuJpegDecoder& operator=(const GpuJpegDecoder&) = delete;

  // The batch's images [N, 3, size, size] float32 on the device, enqueued on the
  // current CUDA stream. The JPEG bytes must stay alive until the stream has
  // passed this point (the caller keeps its last few batches). An image nvJPEG
  // cannot decode is left black and counted (corrupt_samples in to_json()).
  torch::Tensor decode(const std::vector<pipeline::EncodedSample>& samples);

  // {"where": "gpu", "library", "backend", "huffman", "batches", "images",
  //  "host_s" (the consumer thread's time in nvJPEG's calls), "device_s" (decode
  //  and augment on the device), "corrupt_samples", "fallbacks"}.
  nlohmann::json to_json();

  // The library path that was loaded.
  const std::string& library() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mlbench::bench
