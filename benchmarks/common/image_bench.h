// What every image benchmark does around its model: find the dataset (an
// ImageFolder by default, or any pipeline source), run the instrumented
// pipeline, and hand each iteration a batch on the device with the consumer
// wait and the host-to-device copy timed as their own phases; or, under
// --synthetic, one batch made once on the device (no fetch, no prep).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/benchmark_run.h"
#include "core/cli.h"
#include "pipeline/loader.h"
#include "pipeline/options.h"
#include "pipeline/options.h"

namespace mlbench::bench::vision {

// --data, else <DATA_DIRECTORY>/<dataset>/<subdir> (e.g. fake-imagenet-small/train).
std::string default_data_path(const core::BenchOptions& o, const std::string& dataset, const std::string& subdir);

// An ImageFolder reader over `path`, with the reader flags of `p`
// (--drop-after-read); a missing or empty folder is a core::UsageError naming
// it and the mlbench-datagen command that makes `dataset`.
std::shared_ptr<const pipeline::ItemSource> open_image_folder(const core::BenchOptions& o, const std::string& path,
                                                              const std::string& dataset,
                                                              const pipeline::PipelineOptions& p);

// The loader configuration of the shared flags; a bad flag value is a core::UsageError.
pipeline::LoaderConfig loader_config(const core::BenchOptions& o, const pipeline::PipelineOptions& p,
                                     const torch::Device& device);

struct DeviceBatch {
  torch::Tensor images;               // [N, 3, H, W] float32, normalised as the loader's config says, on the device
  torch::Tensor labels;               // [N] int64 on the device
  std::vector<torch::Tensor> extra;   // what `prepare` made, on the device
};

// Called in the wait phase with the host batch (labels on the CPU); returns
// extra host tensors (e.g. SSD box targets) that travel with the batch.
using Prepare = std::function<std::vector<torch::Tensor>(const pipeline::Batch& batch, const torch::Tensor& labels)>;

class ImageStream {
 public:
  // Real data through the pipeline; the loader's workers start here (outside the timed loop).
  ImageStream(std::shared_ptr<const pipeline::ItemSource> source, pipeline::LoaderConfig config, torch::Device device,
              Prepare prepare = {});
  // --synthetic: this batch (already on the device) every iteration.
  explicit ImageStream(DeviceBatch fixed);

  // The next batch: the wait phase (pipeline and `prepare`) and the h2d phase
  // (non-blocking copies from pinned memory; uint8 batches normalised on the device).
  DeviceBatch next(core::Iteration& it);
  // The report's "pipeline" block ({"source": "synthetic"} under --synthetic); stops the loader.
  void finish(nlohmann::json& report);
  bool synthetic() const { return fixed_.has_value(); }

 private:
  std::shared_ptr<pipeline::Loader> loader_;
  torch::Device device_ = torch::kCPU;
  Prepare prepare_;
  pipeline::Normalize normalize_;  // applied on the device to uint8 batches
  std::optional<DeviceBatch> fixed_;
};

// A synthetic batch on `device`: images N(0, 1) [n, 3, size, size], labels uniform in [0, classes).
DeviceBatch synthetic_batch(std::int64_t n, std::int64_t size, std::int64_t classes, const torch::Device& device);

// ImageNet normalisation undone: normalised images -> [0, 1].
torch::Tensor denormalize(const torch::Tensor& images);

}  // namespace mlbench::bench::vision
