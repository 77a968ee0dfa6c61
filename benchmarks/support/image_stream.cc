#include "benchmarks/support/image_stream.h"

#include <filesystem>
#include <stdexcept>

#include "benchmarks/support/torch_runtime.h"
#include "pipeline/http_source.h"
#include "pipeline/source.h"
#include "pipeline/torch_adapter.h"

namespace mlbench::bench::vision {

namespace {

// --data, else <DATA_DIRECTORY>/<dataset>/<subdir> (e.g. fake-imagenet-small/train).
std::string default_data_path(const core::BenchOptions& o, const std::string& dataset, const std::string& subdir) {
  if (!o.data.empty()) return o.data;
  return (std::filesystem::path(o.data_directory) / dataset / subdir).string();
}

// The loader configuration of the shared flags; a bad flag value is a core::UsageError.
pipeline::LoaderConfig loader_config(const core::BenchOptions& o, const pipeline::PipelineOptions& p,
                                     const torch::Device& device) {
  pipeline::LoaderConfig c = pipeline::benchmark_loader_config(o, p);
  if (device.is_cuda()) c.allocator = pipeline::torch_host_allocator();
  return c;
}

}  // namespace

std::shared_ptr<const pipeline::ItemSource> open_image_source(const core::BenchOptions& o, const std::string& path,
                                                              const std::string& dataset,
                                                              const pipeline::PipelineOptions& p) {
  try {
    auto reader = pipeline::open_image_source(path, pipeline::datagen_hint(o, dataset), p);
    if (reader->size() == 0) throw pipeline::DataError(path + " holds no images");
    return reader;
  } catch (const pipeline::DataError& e) {
    throw core::UsageError(e.what());
  } catch (const pipeline::SourceUnavailable& e) {
    throw core::UsageError(e.what());
  }
}

ImageStream::ImageStream(std::shared_ptr<const pipeline::ItemSource> source, pipeline::LoaderConfig config,
                         torch::Device device, Prepare prepare, std::optional<bool> ahead,
                         std::shared_ptr<GpuJpegDecoder> gpu_decoder)
    : device_(device),
      prepare_(std::move(prepare)),
      normalize_(config.transform.normalize),
      ahead_(ahead.value_or(device.is_cuda())),
      gpu_(std::move(gpu_decoder)) {
  if (config.transform.decode_on_device != static_cast<bool>(gpu_)) {
    throw std::logic_error("ImageStream: --decode gpu needs a GpuJpegDecoder, and only it");
  }
  if (source->size() < static_cast<std::size_t>(config.batch_size) && config.drop_last) {
    throw core::UsageError("the dataset has " + std::to_string(source->size()) + " images, fewer than --batch-size " +
                           std::to_string(config.batch_size));
  }
  copier_ = std::make_shared<DeviceCopier>(device_);
  loader_ = std::make_shared<pipeline::Loader>(std::move(source), std::move(config));
  loader_->start();
  if (gpu_) {
    decode_stream_ = std::make_unique<StreamWorker>(device_);
    decode_thread_ = std::thread([this] { decode_loop(); });
  }
}

ImageStream::~ImageStream() {
  stop_decoding();
}

void ImageStream::decode_loop() {
  try {
    for (;;) {
      auto b = loader_->next();
      Decoded d;
      if (b) {
        d.host = {torch::tensor(b->labels, torch::kInt64)};
        d.encoded = std::make_shared<const std::vector<pipeline::EncodedSample>>(std::move(b->encoded));
        if (prepare_) {
          auto extra = prepare_(*b, d.host[0]);
          d.host.insert(d.host.end(), extra.begin(), extra.end());
        }
        d.mark = decode_stream_->run([&] { d.images = gpu_->decode(*d.encoded); });
      } else {
        d.end = true;
      }
      std::unique_lock<std::mutex> lock(decode_mu_);
      decode_cv_.wait(lock, [&] { return decode_stop_ || decoded_.size() < kDecodeAhead; });
      if (decode_stop_) return;
      decoded_.push_back(std::move(d));
      decode_cv_.notify_all();
      if (!b) return;
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(decode_mu_);
    decode_error_ = std::current_exception();
    decode_cv_.notify_all();
  }
}

std::optional<ImageStream::Decoded> ImageStream::next_decoded(bool must) {
  std::unique_lock<std::mutex> lock(decode_mu_);
  decode_cv_.wait(lock, [&] { return !decoded_.empty() || decode_error_; });
  if (decoded_.empty()) std::rethrow_exception(decode_error_);
  Decoded d = std::move(decoded_.front());
  if (!d.end) decoded_.pop_front();  // the end stays: every later call sees it
  decode_cv_.notify_all();
  if (d.end) {
    if (must) throw std::runtime_error("the data pipeline ended before the loop");
    return std::nullopt;
  }
  return d;
}

void ImageStream::stop_decoding() {
  if (!decode_thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(decode_mu_);
    decode_stop_ = true;
  }
  decode_cv_.notify_all();
  if (loader_) loader_->stop();  // wakes a decode thread waiting for a batch
  decode_thread_.join();
}

ImageStream::ImageStream(DeviceBatch fixed) : fixed_(std::move(fixed)) {}

DeviceBatch ImageStream::next(core::Iteration& it) {
  if (fixed_) return *fixed_;
  // The next host batch from the pipeline; none when it has ended and `must` is false.
  // Under --decode gpu the host batch is its labels (and `prepare`'s tensors); the images
  // are decoded on the side stream from the JPEG bytes kept in encoded_alive_.
  using Encoded = std::shared_ptr<const std::vector<pipeline::EncodedSample>>;
  struct Host {
    std::vector<torch::Tensor> tensors;
    Encoded encoded;
    torch::Tensor images;  // --decode gpu: decoded on the decode thread's stream, once `mark` is passed
    StreamWorker::Mark mark;
  };
  auto fetch = [&](bool must) -> std::optional<Host> {
    if (gpu_) {
      auto d = next_decoded(must);
      if (!d) return std::nullopt;
      return Host{std::move(d->host), std::move(d->encoded), std::move(d->images), std::move(d->mark)};
    }
    auto b = loader_->next();
    if (!b) {
      if (must) throw std::runtime_error("the data pipeline ended before the loop");
      return std::nullopt;
    }
    Host host;
    auto t = pipeline::to_tensors(*b);
    host.tensors = {t.data, t.labels};
    if (prepare_) {
      auto extra = prepare_(*b, t.labels);
      host.tensors.insert(host.tensors.end(), extra.begin(), extra.end());
    }
    return host;
  };
  // Non-blocking copies on the side stream; uint8 images are normalised there too, and
  // --decode gpu's images decoded there.
  auto stage = [&](const Host& host) {
    if (host.encoded) {
      encoded_alive_.push_back(host.encoded);
      while (encoded_alive_.size() > DeviceCopier::kInFlight + 2) encoded_alive_.pop_front();
    }
    copier_->stage(host.tensors, [&](std::vector<torch::Tensor>& t) {
      if (host.encoded) {
        StreamWorker::wait_for(host.mark);  // the copy stream (and so the step) waits for the decode
        t.insert(t.begin(), host.images);
        return;
      }
      if (t[0].scalar_type() != torch::kUInt8) return;
      if (!norm_mean_.defined()) {  // once, on the device the batches go to
        const auto opts = t[0].options().dtype(torch::kFloat32);
        norm_mean_ =
            torch::tensor({normalize_.mean[0], normalize_.mean[1], normalize_.mean[2]}, opts).view({1, 3, 1, 1});
        norm_std_ = torch::tensor({normalize_.std[0], normalize_.std[1], normalize_.std[2]}, opts).view({1, 3, 1, 1});
      }
      t[0] = (t[0].to(torch::kFloat32) / 255.0 - norm_mean_) / norm_std_;
    });
  };
  auto host = it.wait([&] {
    copier_->release_finished();  // pinned buffers whose copies are done go back to the pool first
    if (ahead_ && !copier_->staged()) stage(*fetch(true));  // the first batch
    return fetch(!ahead_);  // one batch ahead, the pipeline may end: the staged batch is still handed out
  });
  return it.h2d([&] {
    if (!ahead_) stage(*host);  // this iteration's batch
    const auto on_device = copier_->take();
    if (ahead_ && host) stage(*host);  // the next iteration's, to run behind this step
    DeviceBatch d;
    d.images = on_device[0];
    d.labels = on_device[1];
    d.extra.assign(on_device.begin() + 2, on_device.end());
    return d;
  });
}

void ImageStream::finish(nlohmann::json& report) {
  if (fixed_) {
    report["pipeline"] = {{"source", "synthetic"}};
    return;
  }
  stop_decoding();
  report["pipeline"] = loader_->to_json();
  report["pipeline"]["decode"] = gpu_ ? gpu_->to_json() : nlohmann::json{{"where", "cpu"}};
  copier_.reset();  // waits for copies still reading the loader's buffers
  loader_->stop();
}

DeviceBatch synthetic_batch(std::int64_t n, std::int64_t size, std::int64_t classes, const torch::Device& device) {
  DeviceBatch d;
  d.images = torch::randn({n, 3, size, size}, torch::TensorOptions().device(device));
  d.labels = torch::randint(classes, {n}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  return d;
}

DeviceBatch uniform_images(std::int64_t n, std::int64_t size, double lo, double hi, const torch::Device& device) {
  DeviceBatch d;
  d.images = torch::rand({n, 3, size, size}, torch::TensorOptions().device(device)) * (hi - lo) + lo;
  return d;
}

std::shared_ptr<ImageStream> make_image_stream(const core::BenchOptions& o, const pipeline::PipelineOptions& p,
                                               const torch::Device& device, const ImageData& data) {
  if (o.synthetic) return std::make_shared<ImageStream>(data.synthetic());
  const std::string path = default_data_path(o, data.dataset, data.subdir);
  PipelineSource source = data.open ? data.open(path) : PipelineSource{open_image_source(o, path, data.dataset, p), {}};
  auto config = loader_config(o, p, device);
  if (data.transform) data.transform(config);
  std::shared_ptr<GpuJpegDecoder> gpu;
  if (config.transform.decode_on_device) {
    if (!device.is_cuda())
      throw core::UsageError("--decode gpu decodes on a CUDA device: give --cuda (none is in use)");
    if (!built_with_cuda())
      throw core::UsageError("--decode gpu needs a build with a CUDA LibTorch (this one is CPU-only)");
    try {
      gpu = std::make_shared<GpuJpegDecoder>(device, config.transform.image_size, config.transform.normalize,
                                             p.nvjpeg_backend);
    } catch (const std::runtime_error& e) {
      throw core::UsageError(e.what());
    }
  }
  return std::make_shared<ImageStream>(std::move(source.items), std::move(config), device, std::move(source.prepare),
                                       std::nullopt, std::move(gpu));
}

core::Workload image_workload(const core::BenchOptions& o, const pipeline::PipelineOptions& p,
                              std::shared_ptr<ImageStream> stream, TrainStep step,
                              std::function<void(nlohmann::json& metrics)> metrics) {
  core::Workload work;
  work.items_per_iteration = o.batch_size;
  work.step = [stream, step = std::move(step), fetch_only = p.fetch_only](core::Iteration& it) {
    auto b = stream->next(it);
    if (fetch_only) return;  // --fetch-only: the pipeline alone, no model step
    auto loss = it.compute([&] { return step(b); });
    it.set_loss(deferred_loss(loss));
  };
  work.finish = [stream, metrics = std::move(metrics)](nlohmann::json& report) {
    stream->finish(report);
    if (metrics) metrics(report["metrics"]);
  };
  return work;
}

}  // namespace mlbench::bench::vision
