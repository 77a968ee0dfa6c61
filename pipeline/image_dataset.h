// The image dataset the loader runs over: items from an ItemSource (an
// ImageFolder read from storage, or decoded images in memory) through the
// never-evicting item cache and the per-sample stages, into batch buffers from
// the host buffer pool. Also the synthetic batch (--synthetic).
#pragma once

#include <memory>
#include <vector>

#include "pipeline/batch.h"
#include "pipeline/buffer_pool.h"
#include "pipeline/dataset.h"
#include "pipeline/item_cache.h"
#include "pipeline/sample_stages.h"
#include "pipeline/source.h"

namespace mlbench::pipeline {

class ImageDataset : public Dataset<Batch> {
 public:
  // `cache`: the item cache's capacity (disabled: none). `stats`: false
  // (--no-stats) reads no clock unless a trace asks for it.
  ImageDataset(std::shared_ptr<const ItemSource> source, StageConfig stages, CacheCapacity cache,
               HostAllocator allocator, bool stats);

  std::size_t size() const override { return source_->size(); }
  void prepare(const BuildSetup& setup) override;
  Batch get_batch(const BatchRequest& request) override;

  const ItemSource& source() const { return *source_; }
  const ItemCache* cache() const { return cache_.get(); }
  int channels() const { return stages_.channels(); }

 private:
  std::shared_ptr<const ItemSource> source_;
  std::unique_ptr<ItemCache> cache_;
  SampleStages stages_;
  BufferPool pool_;
  bool stats_;
  PipelineStats* sink_ = nullptr;
  std::vector<std::unique_ptr<SampleWorker>> workers_;
};

// One batch of random pixels and labels (seeded), made once and served forever
// under --synthetic: no fetch, no prep.
Batch synthetic_batch(const TransformConfig& transform, int batch_size, int channels, std::uint64_t seed,
                      const HostAllocator& allocator);

}  // namespace mlbench::pipeline
