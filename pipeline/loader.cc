#include "pipeline/loader.h"

#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "pipeline/loader_report.h"

namespace mlbench::pipeline {

namespace {

// The flat config split between the loader (sampling, workers, prefetch) and
// the dataset's per-sample stages (transforms, bad-data policy).
LoaderOptions loader_options(const LoaderConfig& c) {
  return {.batch_size = static_cast<std::size_t>(c.batch_size), .workers = c.workers, .prefetch = c.prefetch,
          .drop_last = c.drop_last, .shuffle = c.shuffle, .seed = c.seed, .num_shards = c.num_shards,
          .shard_id = c.shard_id, .max_epochs = c.max_epochs, .stats = c.stats, .trace = c.trace};
}

StageConfig stage_config(const LoaderConfig& c) {
  return {.transform = c.transform, .seed = c.seed, .strict = c.strict, .fetch_only = c.fetch_only,
          .prep = c.prep, .warnings = c.warnings};
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
                                            config_.stats, config_.io_depth);
  const Sampler shard(source_->size(), false, 0, config_.num_shards, config_.shard_id);
  const std::size_t n = shard.shard_size(), bs = static_cast<std::size_t>(config_.batch_size);
  if ((config_.drop_last ? n / bs : (n + bs - 1) / bs) == 0) {
    throw DataError(fmt::format("the dataset has {} items, fewer than one batch of {} (drop_last)", n, bs));
  }
  std::shared_ptr<Dataset<Batch>> built = dataset_;
  if (config_.coordinated.enabled() && !std::getenv(kNoCoordinationEnv)) {
    built = coordinated_ = coordinated_dataset(dataset_, config_);
  }
  loader_ = std::make_unique<DataLoader<Batch>>(built, loader_options(config_));
}

Loader::~Loader() { stop(); }

void Loader::stop() {
  if (loader_) loader_->stop();
  if (coordinated_) coordinated_->leave();  // the others take over this member's share at once
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
  if (dataset_) {
    facts.read_window = dataset_->read_window();
    if (const ReadAhead* ra = dataset_->read_ahead()) {
      facts.reads_issued = ra->reads_issued();
      facts.inline_reads = ra->inline_reads();
      facts.max_outstanding = ra->max_outstanding();
    }
  }
  if (coordinated_) facts.coordinated = coordinated_->to_json();
  return image_loader_report(config_, stats(), facts);
}

}  // namespace mlbench::pipeline
