// The image dataset the loader runs over: items from an ItemSource (an
// ImageFolder read from storage, or decoded images in memory) through the
// never-evicting item cache and the per-sample stages, into batch buffers from
// the host buffer pool; with --io-depth N > 0, items are read ahead of decoding
// (pipeline/read_ahead.h). Also the synthetic batch (--synthetic).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "pipeline/batch.h"
#include "pipeline/buffer_pool.h"
#include "pipeline/dataset.h"
#include "pipeline/item_cache.h"
#include "pipeline/read_ahead.h"
#include "pipeline/sample_stages.h"
#include "pipeline/source.h"

namespace mlbench::pipeline {

class ImageDataset : public Dataset<Batch> {
 public:
  // `cache`: the item cache's capacity (disabled: none). `stats`: false
  // (--no-stats) reads no clock unless a trace asks for it. `io_depth`: reads
  // in flight ahead of decoding (0: each worker reads, then decodes, serially).
  // `adaptive_depth`: the depth adapts from `io_depth` up to its bound (datasets over
  // HTTP without --io-depth; pipeline/depth_controller.h); nullopt: `io_depth` throughout.
  ImageDataset(std::shared_ptr<const ItemSource> source, StageConfig stages, CacheCapacity cache,
               HostAllocator allocator, bool stats, int io_depth = 0, IoEngine io_engine = IoEngine::Threads,
               std::optional<DepthControllerConfig> adaptive_depth = std::nullopt);

  std::size_t size() const override { return source_->size(); }
  void prepare(const BuildSetup& setup) override;
  Batch get_batch(const BatchRequest& request) override;
  void stop() override;
  // The source's own order (tar shards), else the loader's Sampler.
  std::optional<std::vector<std::size_t>> epoch_order(const EpochOrderRequest& request) const override {
    return source_->epoch_order(request);
  }

  const ItemSource& source() const { return *source_; }
  const ItemCache* cache() const { return cache_.get(); }
  ItemCache* cache() { return cache_.get(); }
  int channels() const { return stages_.channels(); }
  // The read-ahead depth now (adaptive: as the controller says; before prepare(): the start).
  int io_depth() const { return read_ahead_ ? read_ahead_->io_depth() : io_depth_; }
  // Reads issued ahead of decoding each worker keeps: the depth's share, at least 1 (0: no
  // read-ahead). Read by each stream at each take, so it follows an adaptive depth.
  std::size_t read_window() const;
  const ReadAhead* read_ahead() const { return read_ahead_.get(); }

 private:
  std::shared_ptr<const ItemSource> source_;
  std::unique_ptr<ItemCache> cache_;
  SampleStages stages_;
  BufferPool pool_;
  bool stats_;
  PipelineStats* sink_ = nullptr;
  std::vector<std::unique_ptr<SampleWorker>> workers_;
  int io_depth_ = 0;
  IoEngine io_engine_ = IoEngine::Threads;
  std::optional<DepthControllerConfig> adaptive_depth_;
  std::unique_ptr<ReadAhead> read_ahead_;
  // Per worker: the reads of its next batch, started while it built the previous one
  // (after read_ahead_: destroyed first, withdrawing what they issued).
  std::vector<std::unique_ptr<ReadStream>> next_reads_;
};

// One batch of random pixels and labels (seeded), made once and served forever
// under --synthetic: no fetch, no prep.
Batch synthetic_batch(const TransformConfig& transform, int batch_size, int channels, std::uint64_t seed,
                      const HostAllocator& allocator);

}  // namespace mlbench::pipeline
