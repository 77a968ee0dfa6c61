#include "pipeline/loader.h"

#include <stdexcept>

#include <fmt/format.h>

#include "pipeline/loader_report.h"

namespace mlbench::pipeline {

namespace {

LoaderOptions loader_options(const LoaderConfig& c) {
  LoaderOptions o;
  o.batch_size = static_cast<std::size_t>(c.batch_size);
  o.workers = c.workers;
  o.prefetch = c.prefetch;
  o.drop_last = c.drop_last;
  o.shuffle = c.shuffle;
  o.seed = c.seed;
  o.num_shards = c.num_shards;
  o.shard_id = c.shard_id;
  o.max_epochs = c.max_epochs;
  o.stats = c.stats;
  o.trace = c.trace;
  return o;
}

StageConfig stage_config(const LoaderConfig& c) {
  StageConfig s;
  s.transform = c.transform;
  s.seed = c.seed;
  s.strict = c.strict;
  s.fetch_only = c.fetch_only;
  s.prep = c.prep;
  s.warnings = c.warnings;
  return s;
}

}  // namespace

// The image loader's DataLoader, compiled once here (loader.h declares it extern).
template class DataLoader<Batch>;

Loader::Loader(std::shared_ptr<const ItemSource> source, LoaderConfig config)
    : config_(std::move(config)), source_(std::move(source)) {
  if (config_.batch_size < 1) throw std::invalid_argument("batch size must be >= 1");
  if (config_.synthetic) {
    synthetic_stats_ = std::make_unique<PipelineStats>(config_.stats);
    return;
  }
  dataset_ = std::make_shared<ImageDataset>(source_, stage_config(config_), config_.cache, config_.allocator,
                                            config_.stats);
  const Sampler shard(source_->size(), false, 0, config_.num_shards, config_.shard_id);
  const std::size_t n = shard.shard_size(), bs = static_cast<std::size_t>(config_.batch_size);
  if ((config_.drop_last ? n / bs : (n + bs - 1) / bs) == 0) {
    throw DataError(fmt::format("the dataset has {} items, fewer than one batch of {} (drop_last)", n, bs));
  }
  loader_ = std::make_unique<DataLoader<Batch>>(dataset_, loader_options(config_));
}

Loader::~Loader() { stop(); }

void Loader::stop() {
  if (loader_) loader_->stop();
}

void Loader::start() {
  if (loader_) {
    loader_->start();
  } else if (!synthetic_) {
    synthetic_ = synthetic_batch(config_.transform, config_.batch_size, 3, config_.seed, config_.allocator);
  }
}

std::optional<Batch> Loader::next() {
  if (loader_) return loader_->next();
  start();
  Batch b = *synthetic_;  // shares the one buffer
  b.sequence = synthetic_served_++;
  b.index = b.sequence;
  synthetic_stats_->record_wait(0.0, 1);
  synthetic_stats_->add_batch();
  return b;
}

nlohmann::json Loader::to_json() const {
  ImageLoaderFacts facts;
  facts.source = config_.synthetic ? nullptr : source_.get();
  facts.cache = cache();
  facts.items_per_epoch = items_per_epoch();
  facts.batches_per_epoch = batches_per_epoch();
  facts.prefetch = effective_prefetch(config_.prefetch, config_.workers);
  return image_loader_report(config_, stats(), facts);
}

}  // namespace mlbench::pipeline
