// The loader: sampler -> (cache | source) fetch -> decode -> augment ->
// collate into one contiguous batch buffer, on N worker threads with a bounded
// prefetch window and in-order delivery. Each worker builds whole batches (as
// PyTorch's DataLoader workers do). Epochs follow each other without a gap;
// every epoch has a fresh order when shuffling.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/item_cache.h"
#include "pipeline/sampler.h"
#include "pipeline/source.h"
#include "pipeline/stats.h"
#include "pipeline/trace.h"
#include "pipeline/transforms.h"

namespace mlbench::pipeline {

// Host memory for a batch. `owner` keeps it alive (the torch adapter hands out
// pinned tensors' storage here when CUDA is present).
struct HostBuffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<void> owner;
};
using HostAllocator = std::function<HostBuffer(std::size_t bytes)>;
HostBuffer default_host_allocator(std::size_t bytes);

enum class OutputType { Float32, Uint8 };
enum class TransformMode { Train, Eval };

struct TransformConfig {
  TransformMode mode = TransformMode::Train;
  int image_size = 224;           // output height = width
  int resize_size = 256;          // Eval: Resize(resize_size) before CenterCrop(image_size)
  RandomResizedCropParams crop;   // Train
  bool flip = true;               // Train: RandomHorizontalFlip(p=0.5)
  Normalize normalize;            // Float32 output only
  OutputType output = OutputType::Float32;
};

struct LoaderConfig {
  int batch_size = 256;
  int workers = 0;                // 0: batches are built in the consumer's thread
  int prefetch = 0;               // batches in flight or ready (0: 2 x workers); at least `workers`
  bool drop_last = true;
  bool shuffle = true;
  std::uint64_t seed = 0;
  int num_shards = 1, shard_id = 0;
  TransformConfig transform;
  bool strict = false;            // a bad sample is an error (default: skip, count, warn once)
  CacheCapacity cache;            // never-evicting item cache (0: none)
  bool synthetic = false;         // one batch made once, served forever
  bool stats = true;              // false: --no-stats (no clock reads in workers)
  long max_epochs = 0;            // 0: endless
  HostAllocator allocator;        // default: plain aligned host memory
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
};

struct Batch {
  HostBuffer data;                // N x C x H x W, float32 or uint8
  std::vector<std::int64_t> labels;
  int size = 0, channels = 3, height = 0, width = 0;
  OutputType type = OutputType::Float32;
  long epoch = 0;
  long index = 0;                 // batch number within the epoch
  long sequence = 0;              // batch number over the run
  const float* floats() const { return static_cast<const float*>(data.data); }
  const std::uint8_t* bytes() const { return static_cast<const std::uint8_t*>(data.data); }
};

class Loader {
 public:
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

  std::size_t batches_per_epoch() const { return batches_per_epoch_; }
  std::size_t items_per_epoch() const { return sampler_.shard_size(); }
  const PipelineStats& stats() const { return stats_; }
  const ItemCache* cache() const { return cache_.get(); }
  // The report's "pipeline" block: stats plus configuration, cache and source.
  nlohmann::json to_json() const;

 private:
  struct Worker;
  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  void worker_loop(int id);
  Batch build_batch(Worker& w, long sequence);
  void load_sample(Worker& w, const std::vector<std::size_t>& order, std::size_t position, long epoch,
                   Batch& batch, int slot);
  std::shared_ptr<const std::vector<std::size_t>> epoch_order(long epoch);
  Batch make_synthetic_batch();
  std::size_t sample_bytes() const;
  void warn_once(std::size_t index, const std::string& why);

  std::shared_ptr<const ItemSource> source_;
  LoaderConfig config_;
  Sampler sampler_;
  std::size_t batches_per_epoch_ = 0;
  int channels_ = 3;
  std::unique_ptr<ItemCache> cache_;
  PipelineStats stats_;

  std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  std::map<long, Slot> ready_;
  long next_to_claim_ = 0;
  long next_to_deliver_ = 0;
  long end_sequence_ = -1;  // first sequence past max_epochs (-1: endless)
  bool stopping_ = false;
  bool started_ = false;
  std::vector<std::thread> threads_;
  std::unique_ptr<Worker> inline_worker_;

  std::mutex order_mu_;
  std::map<long, std::shared_ptr<const std::vector<std::size_t>>> orders_;

  std::mutex warn_mu_;
  std::set<std::size_t> warned_;

  std::optional<Batch> synthetic_;

  // Batch buffers come back here when the consumer drops a batch and are
  // reused: a fresh 150 MB allocation per batch costs its page faults again.
  struct BufferPool {
    std::mutex mu;
    std::vector<HostBuffer> free;
  };
  std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
  HostBuffer allocate(std::size_t bytes);
};

}  // namespace mlbench::pipeline
