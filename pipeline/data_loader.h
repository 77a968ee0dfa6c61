// The one loader (torch/data's DataLoader): a Sampler's epochs (or those the
// dataset plans itself: tar shards, pipeline/shards.h) cut into batches, each built by a Dataset on `workers` threads
// at most `prefetch` batches ahead of the consumer, handed out in order through the reorder queue. Epochs follow each
// other without a gap; every epoch has a fresh order when shuffling. The image loader (pipeline/loader.h) and the
// in-memory benchmarks (vae, recom, translator) run on it.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/dataset.h"
#include "pipeline/queue.h"
#include "pipeline/sampler.h"
#include "pipeline/stats.h"

namespace mlbench::pipeline {

struct LoaderOptions {
  std::size_t batch_size = 1;
  int workers = 0;                // threads that build batches
  // --prefetch: batches built ahead of the consumer (in flight or ready);
  // -1: 2 x workers; never fewer than `workers` (each builds one at a time).
  // 0, or 0 workers: each batch is built in next(), on the consumer's thread.
  int prefetch = -1;
  bool drop_last = true;          // skip an epoch's last, short batch
  bool shuffle = true;
  std::uint64_t seed = 0;
  int num_shards = 1, shard_id = 0;
  long max_epochs = 0;            // 0: endless
  bool stats = true;              // false: no clock reads (--no-stats)
  TraceRecorder* trace = nullptr;
};

// The prefetch a loader runs with, from the options' (see LoaderOptions::prefetch).
inline int effective_prefetch(int prefetch, int workers) {
  if (prefetch < 0) prefetch = 2 * std::max(1, workers);
  return prefetch == 0 ? 0 : std::max(prefetch, workers);
}

template <class B>
class DataLoader {
 public:
  // Throws std::invalid_argument for a batch size of 0 or a dataset without one batch.
  DataLoader(std::shared_ptr<Dataset<B>> dataset, LoaderOptions options)
      : dataset_(std::move(dataset)), options_(options),
        sampler_(dataset_->size(), options_.shuffle, options_.seed, options_.num_shards, options_.shard_id),
        stats_(options_.stats) {
    if (options_.batch_size < 1) throw std::invalid_argument("batch size must be >= 1");
    options_.prefetch = effective_prefetch(options_.prefetch, options_.workers);
    builders_ = options_.prefetch > 0 ? std::max(0, options_.workers) : 0;
    // A dataset that plans its epochs (tar shards: pipeline/shards.h) is asked once here.
    if (auto first = dataset_->epoch_order(order_request(0))) {
      if (options_.num_shards != 1) {
        throw std::invalid_argument(
            "this dataset plans its own order (tar shards): it cannot be split with num_shards; give each node "
            "its own shard list instead");
      }
      if (first->size() != dataset_->size()) throw std::logic_error("a planned epoch order is not a permutation");
      planned_ = true;
      orders_[0] = std::make_shared<const std::vector<std::size_t>>(std::move(*first));
    }
    items_per_epoch_ = planned_ ? dataset_->size() : sampler_.shard_size();
    const std::size_t n = items_per_epoch_, bs = options_.batch_size;
    batches_per_epoch_ = options_.drop_last ? n / bs : (n + bs - 1) / bs;
    if (batches_per_epoch_ == 0) {
      throw std::invalid_argument("a dataset of " + std::to_string(n) + " items has no full batch of " +
                                  std::to_string(bs));
    }
    const long end = options_.max_epochs > 0 ? options_.max_epochs * static_cast<long>(batches_per_epoch_) : -1;
    queue_ = std::make_unique<ReorderQueue<B>>(options_.prefetch, end);
    end_sequence_ = end;
  }
  ~DataLoader() { stop(); }
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts the workers (call it outside timed regions). next() starts them if needed.
  void start() {
    if (started_) return;
    started_ = true;
    dataset_->prepare(BuildSetup{builders_, options_.prefetch, &stats_, options_.trace});
    for (int i = 0; i < builders_; ++i) {
      threads_.emplace_back([this, i] {
        // A worker's next batch, claimed early by the dataset while it built the
        // previous one (BatchRequest::claim_next): built next.
        std::optional<Claimed> ahead;
        while (true) {
          std::optional<Claimed> current;
          if (ahead && !queue_->stopping()) {
            current = std::move(ahead);
            ahead.reset();
          } else if (auto seq = queue_->claim()) {
            current = claimed(*seq, i);
          } else {
            break;
          }
          current->request.claim_next = [this, i, &ahead]() -> const BatchRequest* {
            if (!ahead) {
              if (auto seq = queue_->try_claim()) ahead = claimed(*seq, i);
            }
            return ahead ? &ahead->request : nullptr;
          };
          const long seq = current->request.sequence;
          try {
            queue_->put(seq, build(current->request));
          } catch (...) {
            queue_->fail(seq, std::current_exception());
          }
        }
      });
    }
  }

  // The next batch in order; nullopt after max_epochs. Rethrows the error that
  // building it threw. The time it blocks is the consumer's wait.
  std::optional<B> next() {
    start();
    if (end_sequence_ >= 0 && delivered_ >= end_sequence_) return std::nullopt;
    const auto t0 = Clock::now();
    int ready = 0;
    std::optional<B> b;
    if (builders_ > 0) {
      b.emplace(queue_->take(ready));
    } else {
      inline_claimed_ = delivered_ + 1;
      b.emplace(build(claimed(delivered_, 0).request));
    }
    ++delivered_;
    stats_.record_wait(std::chrono::duration<double>(Clock::now() - t0).count(), ready);
    stats_.add_batch();
    return b;
  }

  // Ends the workers (also done by the destructor).
  void stop() {
    queue_->stop();
    if (started_) dataset_->stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  std::size_t batches_per_epoch() const { return batches_per_epoch_; }
  std::size_t items_per_epoch() const { return items_per_epoch_; }
  const LoaderOptions& options() const { return options_; }  // prefetch as run
  int builders() const { return builders_; }
  const PipelineStats& stats() const { return stats_; }
  // Epochs whose batches have been started (by a worker or inline).
  long epochs_started() const {
    const long claimed = builders_ > 0 ? queue_->claimed() : inline_claimed_.load();
    return claimed == 0 ? 0 : (claimed - 1) / static_cast<long>(batches_per_epoch_) + 1;
  }
  // Seconds spent building batches, summed over the builders (0 under --no-stats).
  double build_seconds() const { return static_cast<double>(build_ns_.load()) * 1e-9; }

 private:
  using Clock = std::chrono::steady_clock;

  // A claimed batch: its request, and the epoch order it points into (kept alive with it).
  struct Claimed {
    BatchRequest request;
    std::shared_ptr<const std::vector<std::size_t>> order;
  };

  Claimed claimed(long sequence, int worker) {
    Claimed c;
    BatchRequest& r = c.request;
    r.sequence = sequence;
    r.epoch = sequence / static_cast<long>(batches_per_epoch_);
    r.index = sequence % static_cast<long>(batches_per_epoch_);
    c.order = epoch_order(r.epoch);
    r.order = c.order.get();
    r.first = static_cast<std::size_t>(r.index) * options_.batch_size;
    r.count = std::min<std::size_t>(options_.batch_size, c.order->size() - r.first);
    r.worker = worker;
    return c;
  }

  B build(const BatchRequest& r) {
    if (!options_.stats) return dataset_->get_batch(r);
    const auto t0 = Clock::now();
    B b = dataset_->get_batch(r);
    build_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    return b;
  }

  std::shared_ptr<const std::vector<std::size_t>> epoch_order(long epoch) {
    std::lock_guard<std::mutex> lock(order_mu_);
    auto it = orders_.find(epoch);
    if (it != orders_.end()) return it->second;
    std::shared_ptr<const std::vector<std::size_t>> order;
    if (planned_) {
      auto planned = dataset_->epoch_order(order_request(epoch));
      if (!planned || planned->size() != items_per_epoch_) {
        throw std::logic_error("a planned epoch order is not a permutation");
      }
      order = std::make_shared<const std::vector<std::size_t>>(std::move(*planned));
    } else {
      order = std::make_shared<const std::vector<std::size_t>>(sampler_.epoch_indices(epoch));
    }
    orders_[epoch] = order;
    // Workers are at most `prefetch` batches apart, so two epochs back is never needed again.
    while (!orders_.empty() && orders_.begin()->first < epoch - 1) orders_.erase(orders_.begin());
    return order;
  }

  // What a planning dataset is asked: lanes are the builders (each reads one stream).
  EpochOrderRequest order_request(long epoch) const {
    return {.epoch = epoch,
            .seed = options_.seed,
            .shuffle = options_.shuffle,
            .batch_size = options_.batch_size,
            .lanes = std::max(1, builders_)};
  }

  std::shared_ptr<Dataset<B>> dataset_;
  LoaderOptions options_;
  Sampler sampler_;
  bool planned_ = false;  // the dataset plans each epoch's order (else the sampler does)
  std::size_t items_per_epoch_ = 0;
  PipelineStats stats_;
  int builders_ = 0;
  std::size_t batches_per_epoch_ = 0;
  long end_sequence_ = -1;  // first sequence past max_epochs (-1: endless)
  std::unique_ptr<ReorderQueue<B>> queue_;
  bool started_ = false;
  long delivered_ = 0;                    // consumer thread only
  std::atomic<long> inline_claimed_{0};
  std::atomic<std::int64_t> build_ns_{0};
  std::vector<std::thread> threads_;
  std::mutex order_mu_;
  std::map<long, std::shared_ptr<const std::vector<std::size_t>>> orders_;
};

// A started loader over items held in memory (shuffled each epoch, every item
// once, short last batch dropped), as vae, recom and translator run it: one
// builder thread `prefetch` batches ahead, or none with `prefetch` 0.
template <class B>
std::shared_ptr<DataLoader<B>> in_memory_loader(std::size_t items, std::size_t batch_size, int prefetch,
                                                std::uint64_t seed, typename InMemoryDataset<B>::Make make) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.prefetch = prefetch;
  o.workers = prefetch != 0 ? 1 : 0;
  o.seed = seed;
  auto loader = std::make_shared<DataLoader<B>>(std::make_shared<InMemoryDataset<B>>(items, std::move(make)), o);
  loader->start();  // builds ahead from now on, outside the timed loop
  return loader;
}

}  // namespace mlbench::pipeline
