#include "pipeline/image_dataset.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

namespace mlbench::pipeline {

namespace {
using Clock = std::chrono::steady_clock;

std::unique_ptr<ItemCache> make_cache(const CacheCapacity& capacity, std::size_t items) {
  if (!capacity.enabled()) return nullptr;
  const ItemCache c = ItemCache::from_capacity(capacity, items);
  return std::make_unique<ItemCache>(c.max_items(), c.max_bytes());
}
}  // namespace

ImageDataset::ImageDataset(std::shared_ptr<const ItemSource> source, StageConfig stages, CacheCapacity cache,
                           HostAllocator allocator, bool stats, int io_depth, IoEngine io_engine,
                           std::optional<DepthControllerConfig> adaptive_depth)
    : source_(std::move(source)), cache_(make_cache(cache, source_->size())),
      stages_(source_, std::move(stages), cache_.get()), pool_(std::move(allocator)), stats_(stats),
      io_depth_(io_depth), io_engine_(io_engine), adaptive_depth_(adaptive_depth) {
  if (io_depth_ < 0) throw std::invalid_argument("the I/O depth must be >= 0");
}

void ImageDataset::prepare(const BuildSetup& setup) {
  sink_ = setup.stats;
  pool_.set_capacity(static_cast<std::size_t>(setup.prefetch + setup.builders + 4));
  const int n = std::max(1, setup.builders);
  for (int i = 0; i < n; ++i) {
    auto w = std::make_unique<SampleWorker>();
    if (setup.trace) {
      w->track = &setup.trace->add_track(setup.builders == 0 ? std::string("loader (inline)") : fmt::format("worker {}", i));
    }
    w->timed = stats_ || w->track;
    workers_.push_back(std::move(w));
  }
  if (io_depth_ > 0) {
    read_ahead_ = std::make_unique<ReadAhead>(source_, cache_.get(), io_depth_, stats_, setup.stats, setup.trace,
                                              io_engine_, adaptive_depth_);
    next_reads_.resize(static_cast<std::size_t>(n));
  }
}

std::size_t ImageDataset::read_window() const {
  if (!read_ahead_) return 0;
  // io_depth reads in flight over the loader: each worker keeps its share ahead (at least one).
  const int workers = std::max<int>(1, static_cast<int>(workers_.size()));
  return static_cast<std::size_t>(std::max(1, read_ahead_->io_depth() / workers));
}

void ImageDataset::stop() {
  if (read_ahead_) read_ahead_->stop();
}

Batch ImageDataset::get_batch(const BatchRequest& r) {
  SampleWorker& w = *workers_.at(static_cast<std::size_t>(r.worker));
  const int n = static_cast<int>(r.count);
  const int s = stages_.config().transform.image_size;
  const int channels = stages_.channels();
  Batch b;
  b.size = n;
  b.channels = channels;
  b.height = b.width = s;
  b.type = stages_.config().transform.output;
  b.epoch = r.epoch;
  b.index = r.index;
  b.sequence = r.sequence;
  {
    const auto t0 = w.timed ? Clock::now() : Clock::time_point{};
    if (stages_.config().transform.decode_on_device) {
      b.encoded.resize(static_cast<std::size_t>(n));  // --decode gpu: JPEG bytes, no pixels
    } else {
      b.data = pool_.allocate(stages_.sample_bytes() * n);
    }
    b.labels.resize(n);
    if (w.timed) {
      const auto t1 = Clock::now();
      w.counters.busy_ns[static_cast<int>(Stage::Collate)] +=
          std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
      if (w.track) w.track->span("allocate", t0, t1, r.sequence);
    }
  }
  w.hwc.resize(static_cast<std::size_t>(s) * s * std::max(channels, 4));  // JPEGs resize as RGBX
  if (read_ahead_) {
    // This batch's reads: started by the previous batch when it claimed this one (a
    // stream for another batch is replaced, which withdraws its reads).
    std::unique_ptr<ReadStream>& next = next_reads_.at(static_cast<std::size_t>(r.worker));
    std::unique_ptr<ReadStream> reads = std::move(next);  // leaves `next` empty
    const auto window = [this] { return read_window(); };
    if (!reads || reads->batch() != r.sequence) {
      reads = std::make_unique<ReadStream>(*read_ahead_, r.indices(), window, r.sequence);
    }
    if (r.claim_next) {
      reads->set_overflow([&](std::size_t room) {
        if (next) return next->issue_ahead(room);
        if (const BatchRequest* following = r.claim_next()) {
          next = std::make_unique<ReadStream>(*read_ahead_, following->indices(), window, following->sequence, room);
        }
      });
    }
    for (int k = 0; k < n; ++k) stages_.load(w, *r.order, r.first + k, r.epoch, b, k, reads.get());
  } else {
    for (int k = 0; k < n; ++k) stages_.load(w, *r.order, r.first + k, r.epoch, b, k);
  }
  if (sink_) sink_->add(w.counters);
  w.counters = BatchCounters{};
  return b;
}

Batch synthetic_batch(const TransformConfig& transform, int batch_size, int channels, std::uint64_t seed,
                      const HostAllocator& allocator) {
  const int s = transform.image_size;
  const int n = batch_size;
  const std::size_t elem = transform.output == OutputType::Float32 ? sizeof(float) : 1;
  Batch b;
  b.size = n;
  b.channels = channels;
  b.height = b.width = s;
  b.type = transform.output;
  b.data = (allocator ? allocator : HostAllocator(default_host_allocator))(
      static_cast<std::size_t>(n) * channels * s * s * elem);
  b.labels.resize(n);
  Rng rng(seed);
  const std::size_t count = static_cast<std::size_t>(n) * channels * s * s;
  if (b.type == OutputType::Float32) {
    float* f = static_cast<float*>(b.data.data);
    for (std::size_t i = 0; i < count; ++i) f[i] = static_cast<float>(rng.uniform(-2.0, 2.0));
  } else {
    auto* u = static_cast<std::uint8_t*>(b.data.data);
    for (std::size_t i = 0; i < count; ++i) u[i] = static_cast<std::uint8_t>(rng.next());
  }
  for (auto& l : b.labels) l = rng.integer(0, 999);
  return b;
}

}  // namespace mlbench::pipeline
