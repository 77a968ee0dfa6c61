// The image loader: the one DataLoader (pipeline/data_loader.h) over an
// ImageDataset (ImageFolder or decoded images; fetch -> decode -> augment ->
// collate into one contiguous batch buffer), configured by one flat
// LoaderConfig that the pipeline's flags fill (pipeline/options.h). Also
// serves --synthetic: one batch made once, served forever.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "pipeline/batch.h"
#include "pipeline/buffer_pool.h"
#include "pipeline/remedies/coordinated.h"
#include "pipeline/data_loader.h"
#include "pipeline/image_dataset.h"
#include "pipeline/item_cache.h"
#include "pipeline/remedies/peer_cache.h"
#include "pipeline/source.h"
#include "pipeline/stats.h"
#include "pipeline/read_ahead.h"
#include "pipeline/trace.h"
#include "pipeline/transforms.h"

namespace mlbench::pipeline {

// --io-depth's default: reads in flight ahead of decoding (docs/pipeline.md,
// "Read-ahead"; docs/performance.md, "Read-ahead and io_uring", for the depth sweep behind 8).
inline constexpr int kDefaultIoDepth = 8;

struct LoaderConfig {
  int batch_size = 256;
  int workers = 0;  // 0: batches are built in the consumer's thread
  // Batches built ahead of the consumer, in flight or ready (docs/pipeline.md):
  // -1: 2 x workers; never fewer than workers; 0: built in the consumer's thread.
  int prefetch = -1;
  // Reads in flight ahead of decoding, over the loader, on as many I/O threads
  // (pipeline/read_ahead.h); 0: each worker reads a sample, then decodes it.
  int io_depth = kDefaultIoDepth;
  // --io-depth not given: over HTTP the requests in flight adapt from io_depth up to
  // kAdaptiveIoDepthBound by the measured rate of reads (pipeline/depth_controller.h, NOTE
  // [Adaptive depth]); other sources keep io_depth. false: io_depth throughout.
  bool adapt_io_depth = false;
  // How those reads are issued (--io-engine; pipeline/read_ahead.h): io_uring where it
  // can serve the source, else I/O threads.
  IoEngine io_engine = IoEngine::Auto;
  bool drop_last = true;
  bool shuffle = true;
  std::uint64_t seed = 0;
  int num_shards = 1, shard_id = 0;
  TransformConfig transform;
  bool strict = false;      // a bad sample is an error (default: skip, count, warn once)
  CacheCapacity cache;      // never-evicting item cache (0: none)
  bool synthetic = false;   // one batch made once, served forever
  bool stats = true;        // false: --no-stats (no clock reads in workers)
  long max_epochs = 0;      // 0: endless
  HostAllocator allocator;  // default: plain aligned host memory
  TraceRecorder* trace = nullptr;
  // --fetch-only: run the fetch stage alone (no decode, augment or collate; the
  // batch holds labels and zeroed pixels). mlbench-stall measures storage and
  // memory fetch rates with it.
  bool fetch_only = false;
  // When set, replaces decode and augment: called with a sample's bytes and
  // index, timed as the "decode" stage; the pixels are left zero. For
  // simulators with a known prep cost (benchmarks/stallsim).
  std::function<void(const Bytes& data, std::size_t index)> prep;
  std::ostream* warnings = nullptr;  // where "skipping ..." lines go (default std::cerr)
  // --coordinated K --group NAME: K processes share the prep (pipeline/remedies/coordinated.h).
  CoordinatedConfig coordinated;
  // --peers host:port,... --rank R: a cache partitioned across nodes (pipeline/remedies/peer_cache.h).
  PartitionConfig partition;
};

// Compiled once, in loader.cc.
extern template class DataLoader<Batch>;

class Loader {
 public:
  // Throws DataError for a dataset with fewer items than one batch (drop_last).
  Loader(std::shared_ptr<const ItemSource> source, LoaderConfig config);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts the workers (call it outside timed regions). next() starts them if needed.
  void start();
  // The next batch in order; nullopt after max_epochs. Rethrows a worker's
  // error (e.g. DataError under --strict-data). Blocking time is the consumer wait.
  std::optional<Batch> next();
  void stop();

  std::size_t batches_per_epoch() const { return loader_ ? loader_->batches_per_epoch() : 1; }
  std::size_t items_per_epoch() const { return loader_ ? loader_->items_per_epoch() : 0; }
  const PipelineStats& stats() const { return loader_ ? loader_->stats() : *synthetic_stats_; }
  const ItemCache* cache() const { return dataset_ ? dataset_->cache() : nullptr; }
  // The report's "pipeline" block (pipeline/loader_report.h).
  nlohmann::json to_json() const;

 private:
  LoaderConfig config_;
  std::shared_ptr<const ItemSource> source_;
  std::shared_ptr<ImageDataset> dataset_;            // null under --synthetic
  std::unique_ptr<DataLoader<Batch>> loader_;        // null under --synthetic
  std::shared_ptr<CoordinatedDataset> coordinated_;  // null unless --coordinated
  std::shared_ptr<PartitionedSource> partitioned_;   // null unless --peers
  std::unique_ptr<PeerCacheServer> peer_server_;     // after dataset_: it serves dataset_'s cache
  std::unique_ptr<PipelineStats> synthetic_stats_;
  std::optional<Batch> synthetic_;
  long synthetic_served_ = 0;

  void start_peer_server();
  void linger_for_peers();
};

}  // namespace mlbench::pipeline
