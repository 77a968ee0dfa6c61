#include "pipeline/loader.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "pipeline/jpeg_decoder.h"

namespace mlbench::pipeline {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int kMaxReplacements = 16;
}  // namespace

HostBuffer default_host_allocator(std::size_t bytes) {
  const std::size_t size = std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, size);
  if (!p) throw std::bad_alloc();
  return HostBuffer{p, bytes, std::shared_ptr<void>(p, std::free)};
}

struct Loader::Worker {
  JpegDecoder decoder;
  Image decoded;
  Bytes bytes;
  std::vector<std::uint8_t> hwc;
  BatchCounters counters;
  TraceRecorder::Track* track = nullptr;
};

Loader::Loader(std::shared_ptr<const ItemSource> source, LoaderConfig config)
    : source_(std::move(source)), config_(std::move(config)),
      sampler_(config_.synthetic ? 0 : source_->size(), config_.shuffle, config_.seed, config_.num_shards,
               config_.shard_id),
      stats_(config_.stats) {
  if (config_.batch_size < 1) throw std::invalid_argument("batch size must be >= 1");
  if (!config_.allocator) config_.allocator = default_host_allocator;
  if (config_.prefetch <= 0) config_.prefetch = 2 * std::max(1, config_.workers);
  config_.prefetch = std::max(config_.prefetch, config_.workers);
  if (config_.synthetic) {
    batches_per_epoch_ = 1;
    return;
  }
  if (source_->encoding() == Encoding::RawHwc) channels_ = source_->raw_channels();
  if (channels_ != 1 && channels_ != 3) throw std::invalid_argument("the pipeline handles 1 or 3 channels");
  const std::size_t n = sampler_.shard_size();
  batches_per_epoch_ = config_.drop_last ? n / config_.batch_size : (n + config_.batch_size - 1) / config_.batch_size;
  if (batches_per_epoch_ == 0) {
    throw DataError(fmt::format("the dataset has {} items, fewer than one batch of {} (drop_last)", n,
                                config_.batch_size));
  }
  if (config_.max_epochs > 0) end_sequence_ = config_.max_epochs * static_cast<long>(batches_per_epoch_);
  if (config_.cache.enabled()) {
    const ItemCache c = ItemCache::from_capacity(config_.cache, source_->size());
    cache_ = std::make_unique<ItemCache>(c.max_items(), c.max_bytes());
  }
}

Loader::~Loader() { stop(); }

void Loader::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

std::size_t Loader::sample_bytes() const {
  const std::size_t elem = config_.transform.output == OutputType::Float32 ? sizeof(float) : 1;
  return static_cast<std::size_t>(channels_) * config_.transform.image_size * config_.transform.image_size * elem;
}

void Loader::start() {
  if (started_) return;
  started_ = true;
  if (config_.synthetic) {
    synthetic_ = make_synthetic_batch();
    return;
  }
  if (config_.workers == 0) {
    inline_worker_ = std::make_unique<Worker>();
    if (config_.trace) inline_worker_->track = &config_.trace->add_track("loader (inline)");
    return;
  }
  for (int i = 0; i < config_.workers; ++i) {
    TraceRecorder::Track* track = config_.trace ? &config_.trace->add_track(fmt::format("worker {}", i)) : nullptr;
    threads_.emplace_back([this, i, track] {
      (void)i;
      Worker w;
      w.track = track;
      for (;;) {
        long seq = 0;
        {
          std::unique_lock<std::mutex> lock(mu_);
          work_cv_.wait(lock, [&] {
            return stopping_ || ((end_sequence_ < 0 || next_to_claim_ < end_sequence_) &&
                                 next_to_claim_ < next_to_deliver_ + config_.prefetch);
          });
          if (stopping_) return;
          seq = next_to_claim_++;
        }
        Slot slot;
        try {
          slot.batch = build_batch(w, seq);
        } catch (...) {
          slot.error = std::current_exception();
        }
        {
          std::lock_guard<std::mutex> lock(mu_);
          ready_[seq] = std::move(slot);
        }
        ready_cv_.notify_all();
      }
    });
  }
}

std::optional<Batch> Loader::next() {
  start();
  if (synthetic_) {
    Batch b = *synthetic_;  // shares the one buffer
    b.sequence = next_to_deliver_++;
    b.index = b.sequence;
    stats_.record_wait(0.0, 1);
    stats_.add_batch();
    return b;
  }
  if (end_sequence_ >= 0 && next_to_deliver_ >= end_sequence_) return std::nullopt;
  if (!inline_worker_) {
    const auto t0 = Clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    const int depth = static_cast<int>(ready_.size());
    ready_cv_.wait(lock, [&] { return ready_.count(next_to_deliver_) > 0; });
    auto node = ready_.extract(next_to_deliver_);
    ++next_to_deliver_;
    lock.unlock();
    work_cv_.notify_all();
    stats_.record_wait(std::chrono::duration<double>(Clock::now() - t0).count(), depth);
    if (node.mapped().error) std::rethrow_exception(node.mapped().error);
    stats_.add_batch();
    return std::move(node.mapped().batch);
  }
  const auto t0 = Clock::now();
  Batch b = build_batch(*inline_worker_, next_to_deliver_++);
  stats_.record_wait(std::chrono::duration<double>(Clock::now() - t0).count(), 0);
  stats_.add_batch();
  return b;
}

std::shared_ptr<const std::vector<std::size_t>> Loader::epoch_order(long epoch) {
  std::lock_guard<std::mutex> lock(order_mu_);
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  auto order = std::make_shared<const std::vector<std::size_t>>(sampler_.epoch_indices(epoch));
  orders_[epoch] = order;
  // Workers are at most `prefetch` batches apart, so two epochs back is never needed again.
  while (!orders_.empty() && orders_.begin()->first < epoch - 1) orders_.erase(orders_.begin());
  return order;
}

Batch Loader::build_batch(Worker& w, long sequence) {
  const long epoch = sequence / static_cast<long>(batches_per_epoch_);
  const long index = sequence % static_cast<long>(batches_per_epoch_);
  const auto order = epoch_order(epoch);
  const std::size_t first = static_cast<std::size_t>(index) * config_.batch_size;
  const int n = static_cast<int>(std::min<std::size_t>(config_.batch_size, order->size() - first));
  const int s = config_.transform.image_size;
  Batch b;
  b.size = n;
  b.channels = channels_;
  b.height = b.width = s;
  b.type = config_.transform.output;
  b.epoch = epoch;
  b.index = index;
  b.sequence = sequence;
  {
    const bool timed = config_.stats || w.track;
    const auto t0 = timed ? Clock::now() : Clock::time_point{};
    b.data = allocate(sample_bytes() * n);
    b.labels.resize(n);
    if (timed) {
      const auto t1 = Clock::now();
      w.counters.busy_ns[static_cast<int>(Stage::Collate)] +=
          std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
      if (w.track) w.track->span("allocate", t0, t1, sequence);
    }
  }
  w.hwc.resize(static_cast<std::size_t>(s) * s * channels_);
  for (int k = 0; k < n; ++k) load_sample(w, *order, first + k, epoch, b, k);
  stats_.add(w.counters);
  w.counters = BatchCounters{};
  return b;
}

void Loader::warn_once(std::size_t index, const std::string& why) {
  std::lock_guard<std::mutex> lock(warn_mu_);
  if (!warned_.insert(index).second) return;
  std::ostream& out = config_.warnings ? *config_.warnings : std::cerr;
  out << "warning: skipping " << source_->describe(index) << ": " << why << " (counted in corrupt_samples)\n";
}

void Loader::load_sample(Worker& w, const std::vector<std::size_t>& order, std::size_t position, long epoch,
                         Batch& batch, int slot) {
  const TransformConfig& tc = config_.transform;
  const int s = tc.image_size;
  const bool timed = config_.stats || w.track;
  const std::int64_t seq = batch.sequence;
  // Runs `f` as stage `stage`, timing it when stats or the trace want it.
  auto stage = [&](Stage st, std::size_t item, auto&& f) {
    if (!timed) return f();
    const auto t0 = Clock::now();
    f();
    const auto t1 = Clock::now();
    const int i = static_cast<int>(st);
    w.counters.busy_ns[i] += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    w.counters.items[i] += 1;
    if (w.track) w.track->span(stage_name(st), t0, t1, seq, static_cast<std::int64_t>(item));
  };
  for (int attempt = 0; attempt <= kMaxReplacements; ++attempt) {
    // A bad sample is replaced by another of the same epoch, chosen deterministically.
    const std::size_t idx =
        attempt == 0 ? order[position]
                     : order[mix_seed(mix_seed(config_.seed, static_cast<std::uint64_t>(epoch)),
                                      position * 131 + static_cast<std::uint64_t>(attempt)) %
                             order.size()];
    Rng rng(mix_seed(mix_seed(config_.seed ^ 0xa5a5, static_cast<std::uint64_t>(epoch)),
                     position * 131 + static_cast<std::uint64_t>(attempt)));
    try {
      const Bytes* data = nullptr;
      std::shared_ptr<const Bytes> cached;
      stage(Stage::Fetch, idx, [&] {
        if (cache_) {
          cached = cache_->get(idx);
          if (cached) {
            w.counters.bytes_cached += static_cast<std::int64_t>(cached->size());
          } else {
            auto fresh = std::make_shared<Bytes>();
            source_->fetch(idx, *fresh);
            w.counters.bytes_read += static_cast<std::int64_t>(fresh->size());
            cached = fresh;
            cache_->put(idx, cached);
          }
          data = cached.get();
        } else {
          source_->fetch(idx, w.bytes);
          w.counters.bytes_read += static_cast<std::int64_t>(w.bytes.size());
          data = &w.bytes;
        }
      });
      if (config_.fetch_only || config_.prep) {
        if (config_.prep && !config_.fetch_only) stage(Stage::Decode, idx, [&] { config_.prep(*data, idx); });
        batch.labels[slot] = source_->label(idx);
        return;
      }
      const std::uint8_t* pixels = nullptr;
      int width = 0, height = 0;
      CropBox box;
      stage(Stage::Decode, idx, [&] {
        if (source_->encoding() == Encoding::Jpeg) {
          int full_w = 0, full_h = 0;
          w.decoder.header(data->data(), data->size(), full_w, full_h);
          box = tc.mode == TransformMode::Train ? random_resized_crop_box(full_w, full_h, tc.crop, rng)
                                                : center_crop_box(full_w, full_h, tc.resize_size, s);
          const ScalingFactor scale = choose_scale(JpegDecoder::fast_scaling_factors(), box.w, box.h, s, s);
          // Only the crop window (widened to iMCU columns) is decoded; box becomes its place in the window.
          box = w.decoder.decode_region(data->data(), data->size(), box, scale, w.decoded);
          pixels = w.decoded.pixels.data();
          width = w.decoded.width;
          height = w.decoded.height;
        } else {
          width = source_->raw_width();
          height = source_->raw_height();
          pixels = data->data();
          box = tc.mode == TransformMode::Train ? random_resized_crop_box(width, height, tc.crop, rng)
                                                : center_crop_box(width, height, tc.resize_size, s);
        }
      });
      bool flip = false;
      stage(Stage::Augment, idx, [&] {
        flip = tc.mode == TransformMode::Train && tc.flip && rng.uniform() < 0.5;
        resize_crop(pixels, width, height, channels_, box, s, s, w.hwc.data());
      });
      stage(Stage::Collate, idx, [&] {
        const std::size_t offset = static_cast<std::size_t>(slot) * channels_ * s * s;
        if (tc.output == OutputType::Float32) {
          collate_chw_float(w.hwc.data(), s, s, channels_, flip, tc.normalize,
                            static_cast<float*>(batch.data.data) + offset);
        } else {
          collate_chw_uint8(w.hwc.data(), s, s, channels_, flip, static_cast<std::uint8_t*>(batch.data.data) + offset);
        }
        batch.labels[slot] = source_->label(idx);
      });
      return;
    } catch (const DataError& e) {
      if (config_.strict) throw DataError(std::string(e.what()) + " (--strict-data)");
      w.counters.corrupt += 1;
      warn_once(idx, e.what());
    } catch (const DecodeError& e) {
      if (config_.strict) throw DataError(source_->describe(idx) + ": " + e.what() + " (--strict-data)");
      w.counters.corrupt += 1;
      warn_once(idx, e.what());
    }
  }
  throw DataError(fmt::format("{} bad samples in a row near {}: is the dataset corrupt?", kMaxReplacements + 1,
                              source_->describe(order[position])));
}

HostBuffer Loader::allocate(std::size_t bytes) {
  HostBuffer raw;
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    auto it = std::find_if(pool_->free.begin(), pool_->free.end(), [&](const HostBuffer& b) { return b.bytes == bytes; });
    if (it != pool_->free.end()) {
      raw = std::move(*it);
      pool_->free.erase(it);
    }
  }
  if (!raw.data) raw = config_.allocator(bytes);
  const std::size_t keep = static_cast<std::size_t>(config_.prefetch + config_.workers + 4);
  std::weak_ptr<BufferPool> weak = pool_;
  void* data = raw.data;
  // The returned owner gives the buffer back to the pool (or frees it when the
  // pool is gone or full) once the last user of the batch lets go.
  auto owner = std::shared_ptr<void>(data, [weak, raw, keep](void*) mutable {
    if (auto pool = weak.lock()) {
      std::lock_guard<std::mutex> lock(pool->mu);
      if (pool->free.size() < keep) pool->free.push_back(std::move(raw));
    }
  });
  return HostBuffer{data, bytes, std::move(owner)};
}

Batch Loader::make_synthetic_batch() {
  const int s = config_.transform.image_size;
  const int n = config_.batch_size;
  Batch b;
  b.size = n;
  b.channels = channels_;
  b.height = b.width = s;
  b.type = config_.transform.output;
  b.data = config_.allocator(sample_bytes() * n);
  b.labels.resize(n);
  Rng rng(config_.seed);
  const std::size_t count = static_cast<std::size_t>(n) * channels_ * s * s;
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

nlohmann::json Loader::to_json() const {
  nlohmann::json j = stats_.to_json();
  std::string source = "synthetic";
  if (!config_.synthetic) source = source_->encoding() == Encoding::Jpeg ? "image-folder" : "decoded";
  j["source"] = source;
  if (auto folder = std::dynamic_pointer_cast<const ImageFolderReader>(source_)) {
    j["root"] = folder->root().string();
    j["classes"] = folder->classes().size();
    j["dataset_bytes"] = folder->total_bytes();
  }
  j["items_per_epoch"] = config_.synthetic ? 0 : sampler_.shard_size();
  j["batches_per_epoch"] = batches_per_epoch_;
  j["batch_size"] = config_.batch_size;
  j["workers"] = config_.workers;
  j["prefetch"] = config_.prefetch;
  j["image_size"] = config_.transform.image_size;
  j["transform"] = config_.transform.mode == TransformMode::Train ? "train" : "eval";
  j["output"] = config_.transform.output == OutputType::Float32 ? "float32" : "uint8";
  j["strict_data"] = config_.strict;
  j["fetch_only"] = config_.fetch_only;
  j["custom_prep"] = static_cast<bool>(config_.prep);
  if (auto folder = std::dynamic_pointer_cast<const ImageFolderReader>(source_)) j["drop_after_read"] = folder->drop_after_read();
  if (cache_) {
    j["cache"] = {{"capacity_items", cache_->max_items() == UINT64_MAX ? nlohmann::json() : nlohmann::json(cache_->max_items())},
                  {"capacity_bytes", cache_->max_bytes() == UINT64_MAX ? nlohmann::json() : nlohmann::json(cache_->max_bytes())},
                  {"items", cache_->items()},
                  {"bytes", cache_->bytes()},
                  {"hits", cache_->hits()},
                  {"misses", cache_->misses()}};
  } else {
    j["cache"] = nullptr;
  }
  return j;
}

}  // namespace mlbench::pipeline
