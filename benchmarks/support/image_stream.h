// The image stream of every image benchmark (convnet, convnet_fp16, dcgan,
// reso, fast_style, ssd) and the one factory that makes it: the instrumented
// pipeline over the dataset (an ImageFolder by default, or any pipeline
// source), handing each iteration a batch on the device with the consumer wait
// and the host-to-device copy timed as their own phases; or, under
// --synthetic, one batch made once on the device (no fetch, no prep). Also the
// workload shape they share: next batch, model step (skipped by --fetch-only),
// pipeline block and metrics in the report.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "benchmarks/support/device_copy.h"
#include "benchmarks/support/gpu_decode.h"
#include "core/benchmark_run.h"
#include "core/cli.h"
#include "pipeline/loader.h"
#include "pipeline/options.h"

namespace mlbench::bench::vision {

// The source at `path` (pipeline::open_image_source: an ImageFolder, one over HTTP, or tar
// shards for DIR/*.tar, a .tar or a .shards list), with the reader flags of `p`
// (--drop-after-read, --fetch-timeout, --shuffle-buffer, ...); a missing or empty dataset
// (or a server that does not answer) is a core::UsageError naming it and the
// mlbench-datagen command that makes `dataset`.
std::shared_ptr<const pipeline::ItemSource> open_image_source(const core::BenchOptions& o, const std::string& path,
                                                              const std::string& dataset,
                                                              const pipeline::PipelineOptions& p);

struct DeviceBatch {
  torch::Tensor images;              // [N, 3, H, W] float32, normalised as the loader's config says, on the device
  torch::Tensor labels;              // [N] int64 on the device
  std::vector<torch::Tensor> extra;  // what `prepare` made, on the device
};

// Called in the wait phase with the host batch (labels on the CPU); returns
// extra host tensors (e.g. SSD box targets) that travel with the batch.
using Prepare = std::function<std::vector<torch::Tensor>(const pipeline::Batch& batch, const torch::Tensor& labels)>;

class ImageStream {
 public:
  // Real data through the pipeline; the loader's workers start here (outside the timed loop).
  // `ahead` (default: on a GPU) stages the next batch's copy before handing out
  // this one (DeviceCopier::stage), so that it runs behind this batch's step.
  // `gpu_decoder` (--decode gpu; config.transform.decode_on_device): decodes each
  // batch's JPEGs on the device, on the copy's side stream.
  ImageStream(std::shared_ptr<const pipeline::ItemSource> source, pipeline::LoaderConfig config, torch::Device device,
              Prepare prepare = {}, std::optional<bool> ahead = std::nullopt,
              std::shared_ptr<GpuJpegDecoder> gpu_decoder = nullptr);
  // --synthetic: this batch (already on the device) every iteration.
  explicit ImageStream(DeviceBatch fixed);

  // The next batch: the wait phase (pipeline and `prepare`) and the h2d phase
  // (non-blocking copies from pinned memory on a side stream, DeviceCopier; uint8
  // batches normalised on the device). One batch ahead (`ahead`), the wait phase
  // takes batch n+1 from the pipeline and the h2d phase stages its copy and
  // hands out batch n, whose copy was staged by the call before: the h2d phase
  // is then only the wait for a copy that ran behind the previous step.
  DeviceBatch next(core::Iteration& it);
  ~ImageStream();
  // The report's "pipeline" block ({"source": "synthetic"} under --synthetic); stops the loader.
  void finish(nlohmann::json& report);
  bool synthetic() const { return fixed_.has_value(); }

 private:
  std::shared_ptr<pipeline::Loader> loader_;
  std::shared_ptr<DeviceCopier> copier_;  // declared after the loader: destroyed first
  torch::Device device_ = torch::kCPU;
  Prepare prepare_;
  pipeline::Normalize normalize_;  // applied on the device to uint8 batches
  torch::Tensor norm_mean_,
      norm_std_;  // normalize_ as [1, 3, 1, 1] tensors on the device (made at the first uint8 batch)
  std::optional<DeviceBatch> fixed_;
  bool ahead_ = false;
  // --decode gpu: a thread of its own takes the loader's batches and enqueues their
  // decode on a stream of its own (StreamWorker), up to kDecodeAhead batches ahead
  // of the consumer, so that nvJPEG's host work (parsing, the JPEG engine's
  // submission) never holds the consumer, whose copy stream waits for the decode.
  struct Decoded {
    torch::Tensor images;             // on the device, once `mark` is passed
    std::vector<torch::Tensor> host;  // labels (and `prepare`'s tensors)
    std::shared_ptr<const std::vector<pipeline::EncodedSample>> encoded;
    StreamWorker::Mark mark;
    bool end = false;  // the loader ended
  };
  static constexpr std::size_t kDecodeAhead = 2;
  void decode_loop();
  void stop_decoding();
  std::optional<Decoded> next_decoded(bool must);
  std::shared_ptr<GpuJpegDecoder> gpu_;
  std::unique_ptr<StreamWorker> decode_stream_;
  std::mutex decode_mu_;
  std::condition_variable decode_cv_;
  std::deque<Decoded> decoded_;
  std::exception_ptr decode_error_;
  bool decode_stop_ = false;
  std::thread decode_thread_;
  // The JPEG bytes of the last batches handed out: nvJPEG may read them until the
  // copy's stream passes their decode (at most DeviceCopier::kInFlight + 1 are pending).
  std::deque<std::shared_ptr<const std::vector<pipeline::EncodedSample>>> encoded_alive_;
};

// A synthetic batch on `device`: images N(0, 1) [n, 3, size, size], labels uniform in [0, classes).
DeviceBatch synthetic_batch(std::int64_t n, std::int64_t size, std::int64_t classes, const torch::Device& device);

// A synthetic batch on `device` without labels: images uniform in [lo, hi) [n, 3, size, size]
// (in the range of the benchmark's transform: dcgan [-1, 1), reso [0, 1), fast_style [0, 255)).
DeviceBatch uniform_images(std::int64_t n, std::int64_t size, double lo, double hi, const torch::Device& device);

// A pipeline source and what travels with its batches.
struct PipelineSource {
  std::shared_ptr<const pipeline::ItemSource> items;
  Prepare prepare;  // extra host tensors per batch (ssd's box targets); empty for none
};

// What an image benchmark reads, for make_image_stream.
// Every member has a default (`{}`), so that a benchmark names only the ones it sets.
struct ImageData {
  // The mlbench-datagen name; without --data the path is <DATA_DIRECTORY>/<dataset>/<subdir>.
  std::string dataset{};
  std::string subdir = "train";
  // --synthetic: the batch (on the device) used every iteration.
  std::function<DeviceBatch()> synthetic{};
  // The benchmark's transform, applied to the loader config of the shared
  // flags (left as is: RandomResizedCrop --image-size + flip, ImageNet normalisation).
  std::function<void(pipeline::LoaderConfig&)> transform{};
  // The source at the data path; left empty: open_image_source's (ImageFolder, HTTP, tar shards).
  std::function<PipelineSource(const std::string& path)> open{};
};

// The image stream of a benchmark: `data.synthetic()`'s batch under
// --synthetic, else the pipeline (its workers started here, outside the timed
// loop) over `data`'s source with the shared flags' loader config and
// `data.transform`. User errors (missing dataset, bad flag) are core::UsageError.
std::shared_ptr<ImageStream> make_image_stream(const core::BenchOptions& o, const pipeline::PipelineOptions& p,
                                               const torch::Device& device, const ImageData& data);

// One training step on a batch, run in the compute phase; returns the loss.
using TrainStep = std::function<torch::Tensor(const DeviceBatch&)>;

// The workload of an image benchmark: each iteration takes the stream's next
// batch (wait and h2d phases), then, unless --fetch-only, runs `step` in the
// compute phase (its loss read at the end of the observation); the report gets
// the stream's "pipeline" block, and `metrics` fills report["metrics"].
core::Workload image_workload(const core::BenchOptions& o, const pipeline::PipelineOptions& p,
                              std::shared_ptr<ImageStream> stream, TrainStep step,
                              std::function<void(nlohmann::json& metrics)> metrics);

}  // namespace mlbench::bench::vision
