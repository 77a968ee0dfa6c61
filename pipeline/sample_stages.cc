#include "pipeline/sample_stages.h"

#include <chrono>
#include <iostream>
#include <stdexcept>

#include <fmt/format.h>

#include "core/nvtx.h"
#include "pipeline/fetch_origin.h"
#include "pipeline/sampler.h"

namespace mlbench::pipeline {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int kMaxReplacements = 16;
}  // namespace

SampleStages::SampleStages(std::shared_ptr<const ItemSource> source, StageConfig config, ItemCache* cache)
    : source_(std::move(source)), config_(std::move(config)), cache_(cache) {
  if (source_->encoding() == Encoding::RawHwc) channels_ = source_->raw_channels();
  if (channels_ != 1 && channels_ != 3) throw std::invalid_argument("the pipeline handles 1 or 3 channels");
  if (config_.transform.decode_on_device && (source_->encoding() != Encoding::Jpeg || channels_ != 3)) {
    throw std::invalid_argument("--decode gpu decodes JPEG images (" + source_->describe(0) +
                                " is not a JPEG dataset)");
  }
}

std::size_t SampleStages::sample_bytes() const {
  if (config_.transform.decode_on_device) return 0;  // the pixels are made on the device
  const std::size_t elem = config_.transform.output == OutputType::Float32 ? sizeof(float) : 1;
  return static_cast<std::size_t>(channels_) * config_.transform.image_size * config_.transform.image_size * elem;
}

void SampleStages::warn_once(std::size_t index, const std::string& why) {
  std::lock_guard<std::mutex> lock(warn_mu_);
  if (!warned_.insert(index).second) return;
  std::ostream& out = config_.warnings ? *config_.warnings : std::cerr;
  out << "warning: skipping " << source_->describe(index) << ": " << why << " (counted in corrupt_samples)\n";
}

void SampleStages::load(SampleWorker& w, const std::vector<std::size_t>& order, std::size_t position, long epoch,
                        Batch& batch, int slot, ReadStream* reads) {
  const TransformConfig& tc = config_.transform;
  const int s = tc.image_size;
  const bool timed = w.timed;
  const std::int64_t seq = batch.sequence;
  // Runs `f` as stage `stage`, timing it when stats or the trace want it.
  auto stage = [&](Stage st, std::size_t item, auto&& f) {
    core::nvtx::Range range(stage_name(st));  // --nvtx (the trace's names; a peer fetch is "fetch" here)
    if (!timed) return f();
    this_thread_fetch_origin() = FetchOrigin::kUnknown;
    const auto t0 = Clock::now();
    f();
    const auto t1 = Clock::now();
    const int i = static_cast<int>(st);
    w.counters.busy_ns[i] += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    w.counters.items[i] += 1;
    // A partitioned cache's fetch from a peer is its own span name (docs/pipeline.md, "Trace").
    const bool peer = st == Stage::Fetch && this_thread_fetch_origin() == FetchOrigin::kPeer;
    if (w.track) w.track->span(peer ? "fetch peer" : stage_name(st), t0, t1, seq, static_cast<std::int64_t>(item));
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
        if (reads && attempt == 0) {
          // Read ahead (or served by the cache when issued): the stage is the wait for it.
          FetchedItem item = reads->take();
          (item.from_cache ? w.counters.bytes_cached : w.counters.bytes_read) +=
              static_cast<std::int64_t>(item.data->size());
          cached = std::move(item.data);
          data = cached.get();
        } else if (cache_) {
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
      if (tc.decode_on_device) {
        // The CPU's share of a GPU decode: the header, and the crop and flip drawn as below.
        EncodedSample& e = batch.encoded.at(static_cast<std::size_t>(slot));
        stage(Stage::Decode, idx, [&] {
          if (!has_end_of_image(data->data(), data->size())) throw DecodeError("truncated JPEG (no end-of-image marker)");
          w.decoder.header(data->data(), data->size(), e.width, e.height);
          e.box = tc.mode == TransformMode::Train ? random_resized_crop_box(e.width, e.height, tc.crop, rng)
                                                  : center_crop_box(e.width, e.height, tc.resize_size, s);
          e.flip = tc.mode == TransformMode::Train && tc.flip && rng.uniform() < 0.5;
        });
        stage(Stage::Collate, idx, [&] {
          e.jpeg.assign(data->begin(), data->end());
          batch.labels[slot] = source_->label(idx);
        });
        return;
      }
      const std::uint8_t* pixels = nullptr;
      int width = 0, height = 0, pixel_bytes = channels_;
      CropBox box;
      stage(Stage::Decode, idx, [&] {
        if (source_->encoding() == Encoding::Jpeg) {
          // The crop is drawn from the size in the header the decode reads; only the crop window
          // (widened to iMCU columns) is decoded, as RGBX; box becomes its place in the window.
          box = w.decoder.decode_region(
              data->data(), data->size(),
              [&](int full_w, int full_h) {
                const CropBox b = tc.mode == TransformMode::Train
                                      ? random_resized_crop_box(full_w, full_h, tc.crop, rng)
                                      : center_crop_box(full_w, full_h, tc.resize_size, s);
                return RegionPlan{b, choose_scale(JpegDecoder::fast_scaling_factors(), b.w, b.h, s, s)};
              },
              w.decoded, channels_ == 3 ? PixelFormat::Rgbx : PixelFormat::Rgb);
          pixels = w.decoded.pixels.data();
          width = w.decoded.width;
          height = w.decoded.height;
          pixel_bytes = w.decoded.channels;
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
        resize_crop(pixels, width, height, pixel_bytes, box, s, s, w.hwc.data());
      });
      stage(Stage::Collate, idx, [&] {
        const std::size_t offset = static_cast<std::size_t>(slot) * channels_ * s * s;
        if (tc.output == OutputType::Float32) {
          collate_chw_float(w.hwc.data(), s, s, channels_, flip, tc.normalize,
                            static_cast<float*>(batch.data.data) + offset, pixel_bytes);
        } else {
          collate_chw_uint8(w.hwc.data(), s, s, channels_, flip, static_cast<std::uint8_t*>(batch.data.data) + offset,
                            pixel_bytes);
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

}  // namespace mlbench::pipeline
