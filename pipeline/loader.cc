#include "pipeline/loader.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/stop_signals.h"
#include "pipeline/http_source.h"
#include "pipeline/loader_report.h"

namespace mlbench::pipeline {

namespace {

// The flat config split between the loader (sampling, workers, prefetch) and
// the dataset's per-sample stages (transforms, bad-data policy).
LoaderOptions loader_options(const LoaderConfig& c) {
  return {.batch_size = static_cast<std::size_t>(c.batch_size),
          .workers = c.workers,
          .prefetch = c.prefetch,
          .drop_last = c.drop_last,
          .shuffle = c.shuffle,
          .seed = c.seed,
          .num_shards = c.num_shards,
          .shard_id = c.shard_id,
          .max_epochs = c.max_epochs,
          .stats = c.stats,
          .trace = c.trace};
}

StageConfig stage_config(const LoaderConfig& c) {
  return {.transform = c.transform,
          .seed = c.seed,
          .strict = c.strict,
          .fetch_only = c.fetch_only,
          .prep = c.prep,
          .warnings = c.warnings};
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
  std::shared_ptr<const ItemSource> fetched = source_;
  // A benchmark's memory probe (a forked child, kNoCoordinationEnv set) is no node of the cluster.
  if (config_.partition.enabled() && !std::getenv(kNoCoordinationEnv)) {
    if (!config_.cache.enabled()) {
      throw std::invalid_argument("--peers partitions the item cache: give each node's share with --cache-size");
    }
    partitioned_ = std::make_shared<PartitionedSource>(source_, config_.partition);
    partitioned_->set_trace(config_.trace);
    partitioned_->set_warnings(config_.warnings);
    fetched = partitioned_;
  }
  // Over HTTP the requests in flight set the fetch rate, and the right number depends on the
  // server's latency: measured, unless the user gave one.
  std::optional<DepthControllerConfig> adaptive;
  if (config_.adapt_io_depth && config_.io_depth > 0 && dynamic_cast<const HttpSource*>(source_.get())) {
    adaptive = DepthControllerConfig{.start = config_.io_depth, .bound = kAdaptiveIoDepthBound};
  }
  dataset_ = std::make_shared<ImageDataset>(fetched, stage_config(config_), config_.cache, config_.allocator,
                                            config_.stats, config_.io_depth, config_.io_engine, adaptive);
  if (partitioned_) start_peer_server();
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

void Loader::start_peer_server() {
  const PartitionConfig part = config_.partition;
  ItemCache* cache = dataset_->cache();
  cache->set_admit([part](std::size_t i) { return part.owns(i); });
  // A peer's request for an item of this partition: from the cache, else from storage (and
  // cached, as this node's own read would have been).
  std::shared_ptr<const ItemSource> storage = source_;
  peer_server_ = std::make_unique<PeerCacheServer>(
      part.peers[static_cast<std::size_t>(part.rank)], source_->size(), part,
      [cache, storage](std::size_t index, std::shared_ptr<const Bytes>& out) {
        if ((out = cache->peek(index))) return PeerStatus::kCacheHit;
        auto bytes = std::make_shared<Bytes>();
        storage->fetch(index, *bytes);  // throws: the peer is told kMiss and reads it itself
        cache->put(index, bytes);
        out = std::move(bytes);
        return PeerStatus::kStorage;
      });
  // Untimed (set-up): the others may still be starting. This node already serves.
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int> down = partitioned_->wait_for_peers(part.join_timeout_s);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ostream& out = config_.warnings ? *config_.warnings : std::cerr;
  if (down.empty()) {
    out << fmt::format("partitioned cache: rank {} of {}: all peers up after {:.1f} s\n", part.rank, part.world(),
                       waited);
  } else {
    out << fmt::format(
        "partitioned cache: rank {} of {}: rank(s) {} not up after {:.1f} s: their items come from "
        "storage until they are\n",
        part.rank, part.world(), fmt::join(down, ", "), waited);
  }
}

Loader::~Loader() {
  stop();
  linger_for_peers();
}

void Loader::linger_for_peers() {
  if (!peer_server_ || config_.partition.linger_s <= 0) return;
  // Peers still in their epochs keep getting this partition (a node that left costs them a read
  // from storage per item); a stop signal (Ctrl-C) ends the wait.
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < config_.partition.linger_s &&
         peer_server_->seconds_since_last_request() < kLingerIdleS && core::stop_signal() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

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
  facts.io_depth = config_.synthetic ? 0 : config_.io_depth;
  if (dataset_) {
    facts.read_window = dataset_->read_window();
    if (const ReadAhead* ra = dataset_->read_ahead()) {
      facts.io_depth = ra->io_depth();
      if (const auto controller = ra->depth_controller()) facts.adaptive = controller->to_json();
      facts.reads_issued = ra->reads_issued();
      facts.inline_reads = ra->inline_reads();
      facts.max_outstanding = ra->max_outstanding();
      facts.io_engine = to_string(ra->engine());
      facts.io_threads = ra->io_threads();
    }
  }
  if (coordinated_) facts.coordinated = coordinated_->to_json();
  if (partitioned_) facts.partitioned = partitioned_cache_report(*partitioned_, peer_server_.get());
  return image_loader_report(config_, stats(), facts);
}

}  // namespace mlbench::pipeline
