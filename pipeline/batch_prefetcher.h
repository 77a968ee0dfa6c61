// Sampling, batching and prefetch for datasets held in memory (MNIST images,
// ratings, sentence pairs): the pipeline's Sampler decides which items each
// epoch visits and in which order, `make` turns one batch's indices into a
// batch, and a background thread builds up to `depth` batches ahead of the
// consumer, so the training loop waits only when batching is slower than
// training. Torch-free: the batch type is the caller's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/sampler.h"

namespace mlbench::pipeline {

struct PrefetchOptions {
  std::size_t batch_size = 1;
  int depth = 2;           // batches built ahead; 0: built in next(), on the caller's thread
  bool drop_last = true;   // skip an epoch's last, short batch (a constant batch size)
};

template <class Batch>
class BatchPrefetcher {
 public:
  using Make = std::function<Batch(const std::vector<std::size_t>& indices)>;

  BatchPrefetcher(Sampler sampler, PrefetchOptions options, Make make)
      : sampler_(std::move(sampler)), options_(options), make_(std::move(make)) {
    if (options_.batch_size == 0) throw std::invalid_argument("batch size must be at least 1");
    if (options_.depth < 0) throw std::invalid_argument("prefetch depth must be >= 0");
    const std::size_t n = sampler_.shard_size();
    if (n == 0 || (options_.drop_last && n < options_.batch_size)) {
      throw std::invalid_argument("a dataset of " + std::to_string(n) + " items has no full batch of " +
                                  std::to_string(options_.batch_size));
    }
    if (options_.depth > 0) producer_ = std::thread([this] { produce(); });
  }
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;
  ~BatchPrefetcher() { stop(); }

  // The next batch, in sampler order; rethrows what `make` threw.
  Batch next() {
    if (options_.depth == 0) {
      const auto t0 = std::chrono::steady_clock::now();
      Batch b = make_(next_indices());
      make_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++batches_;
      return b;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || error_ || stopping_; });
    if (queue_.empty()) {
      if (error_) std::rethrow_exception(error_);
      throw std::runtime_error("the batch prefetcher was stopped");
    }
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    ++batches_;
    cv_.notify_all();
    return b;
  }

  // Ends the producer thread (also done by the destructor).
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (producer_.joinable()) producer_.join();
  }

  // Batches handed out so far; the epoch the producer is in (0-based); seconds
  // spent in `make` (on the producer thread, or the caller's with depth 0).
  long batches() const {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  long epoch() const {
    std::lock_guard<std::mutex> lock(mu_);
    return epoch_;
  }
  double make_seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return make_seconds_;
  }

 private:
  // The next batch's indices: the rest of the epoch's order, then a new epoch.
  std::vector<std::size_t> next_indices() {
    const std::size_t bs = options_.batch_size;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_ || pos_ >= order_.size() || (options_.drop_last && order_.size() - pos_ < bs)) {
        if (started_) ++epoch_;
        started_ = true;
        order_ = sampler_.epoch_indices(epoch_);
        pos_ = 0;
      }
    }
    const std::size_t take = std::min(bs, order_.size() - pos_);
    std::vector<std::size_t> out(order_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                 order_.begin() + static_cast<std::ptrdiff_t>(pos_ + take));
    pos_ += take;
    return out;
  }

  void produce() {
    try {
      for (;;) {
        {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [&] { return stopping_ || queue_.size() < static_cast<std::size_t>(options_.depth); });
          if (stopping_) return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        Batch b = make_(next_indices());
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard<std::mutex> lock(mu_);
        make_seconds_ += s;
        queue_.push_back(std::move(b));
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
    }
  }

  Sampler sampler_;
  PrefetchOptions options_;
  Make make_;
  // Producer side (or the caller's, with depth 0).
  std::vector<std::size_t> order_;
  std::size_t pos_ = 0;
  bool started_ = false;
  // Shared.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  std::exception_ptr error_;
  bool stopping_ = false;
  long batches_ = 0;
  long epoch_ = 0;
  double make_seconds_ = 0;
  std::thread producer_;
};

}  // namespace mlbench::pipeline
