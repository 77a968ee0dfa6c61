// The loader's reorder queue: workers claim batch sequence numbers (at most
// `window` ahead of the consumer), finish them in any order, and the consumer
// takes them strictly in order. An error travels in its batch's place.
#pragma once

#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

namespace mlbench::pipeline {

template <class T>
class ReorderQueue {
 public:
  // `end`: the first sequence never to build (-1: endless).
  ReorderQueue(long window, long end) : window_(window), end_(end) {}

  // Worker: the next sequence to build; blocks while `window` are claimed and
  // not yet taken, or all up to `end` are claimed. nullopt once stopped.
  std::optional<long> claim() {
    std::unique_lock<std::mutex> lock(mu_);
    claim_cv_.wait(lock, [&] {
      return stopping_ || ((end_ < 0 || next_to_claim_ < end_) && next_to_claim_ < next_to_take_ + window_);
    });
    if (stopping_) return std::nullopt;
    return next_to_claim_++;
  }
  // Worker: the next sequence when one can be claimed without waiting (read-ahead
  // of a worker's next batch); nullopt when claim() would block, or once stopped.
  std::optional<long> try_claim() {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || (end_ >= 0 && next_to_claim_ >= end_) || next_to_claim_ >= next_to_take_ + window_) {
      return std::nullopt;
    }
    return next_to_claim_++;
  }
  bool stopping() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }
  // Worker: the finished batch `sequence` (or the error that stopped it).
  void put(long sequence, T value) { finish(sequence, Slot{std::move(value), nullptr}); }
  void fail(long sequence, std::exception_ptr error) { finish(sequence, Slot{std::nullopt, std::move(error)}); }

  // Consumer: the next batch in order, blocking until it is ready; rethrows its
  // error. `ready` gets how many batches were ready when it asked.
  T take(int& ready) {
    std::unique_lock<std::mutex> lock(mu_);
    ready = static_cast<int>(ready_.size());
    take_cv_.wait(lock, [&] { return stopping_ || ready_.count(next_to_take_) > 0; });
    if (!ready_.count(next_to_take_)) throw std::runtime_error("the loader was stopped");
    auto node = ready_.extract(next_to_take_);
    ++next_to_take_;
    lock.unlock();
    claim_cv_.notify_all();
    if (node.mapped().error) std::rethrow_exception(node.mapped().error);
    return std::move(*node.mapped().value);
  }

  // Wakes every waiter: claim() returns nullopt, take() throws.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    claim_cv_.notify_all();
    take_cv_.notify_all();
  }
  long claimed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return next_to_claim_;
  }

 private:
  struct Slot {
    std::optional<T> value;
    std::exception_ptr error;
  };
  void finish(long sequence, Slot slot) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_.emplace(sequence, std::move(slot));
    }
    take_cv_.notify_all();
  }

  const long window_, end_;
  mutable std::mutex mu_;
  std::condition_variable claim_cv_, take_cv_;
  std::map<long, Slot> ready_;
  long next_to_claim_ = 0, next_to_take_ = 0;
  bool stopping_ = false;
};

}  // namespace mlbench::pipeline
