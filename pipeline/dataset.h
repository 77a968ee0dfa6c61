// The Dataset interface the loader runs over (torch/data's BatchDataset): the
// loader's sampler decides which items a batch holds, the dataset builds the
// batch from them. Two kinds: ImageDataset (pipeline/image_dataset.h: items
// read from an ImageFolder or held decoded, through the per-sample stages) and
// InMemoryDataset below (MNIST pixels, ratings, sentence pairs already in
// memory: the caller's function gathers a batch).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "pipeline/sampler.h"

namespace mlbench::pipeline {

class PipelineStats;
class TraceRecorder;

// One batch to build: its place in the run and its items.
struct BatchRequest {
  long sequence = 0;              // batch number over the run
  long epoch = 0;
  long index = 0;                 // batch number within the epoch
  const std::vector<std::size_t>* order = nullptr;  // the epoch's sampler order
  std::size_t first = 0;          // the batch's first position in `order`
  std::size_t count = 0;          // its number of items
  int worker = 0;                 // which builder (0 .. builders-1; 0 when built inline)
  // The same worker's next batch, claimed now if it can be without waiting (the
  // loader then builds it next), so that its reads can be issued while this one
  // is built; null when none can be (the loader is `prefetch` batches ahead, or
  // at its end). Empty when the loader has no builders.
  std::function<const BatchRequest*()> claim_next;

  std::size_t item(std::size_t k) const { return (*order)[first + k]; }
  std::vector<std::size_t> indices() const {
    return {order->begin() + static_cast<std::ptrdiff_t>(first),
            order->begin() + static_cast<std::ptrdiff_t>(first + count)};
  }
};

// What the loader tells a dataset once, before the first batch is built.
struct BuildSetup {
  int builders = 0;               // worker threads (0: batches are built in the consumer's thread)
  int prefetch = 0;               // batches built ahead (docs/pipeline.md)
  PipelineStats* stats = nullptr; // where per-stage counters go
  TraceRecorder* trace = nullptr; // null: no trace
};

template <class B>
class Dataset {
 public:
  using BatchType = B;
  virtual ~Dataset() = default;
  virtual std::size_t size() const = 0;
  virtual void prepare(const BuildSetup&) {}
  // The loader is stopping: wake builders blocked inside get_batch (e.g. on
  // reads in flight) so that they return or throw. Called before joining them.
  virtual void stop() {}
  // Builds one batch. Called from `builders` threads at once, each with its own
  // `request.worker`, so per-worker state needs no lock.
  virtual B get_batch(const BatchRequest& request) = 0;
  // An epoch's order when the dataset plans it (a permutation of [0, size())); nullopt
  // (the default): the loader's Sampler decides (ItemSource::epoch_order).
  virtual std::optional<std::vector<std::size_t>> epoch_order(const EpochOrderRequest& /*request*/) const {
    return std::nullopt;
  }
};

// Items held in memory by the caller; `make(indices)` gathers one batch of them.
template <class B>
class InMemoryDataset : public Dataset<B> {
 public:
  using Make = std::function<B(const std::vector<std::size_t>& indices)>;
  InMemoryDataset(std::size_t size, Make make) : size_(size), make_(std::move(make)) {
    if (!make_) throw std::invalid_argument("InMemoryDataset: no batch function");
  }
  std::size_t size() const override { return size_; }
  B get_batch(const BatchRequest& request) override { return make_(request.indices()); }

 private:
  std::size_t size_;
  Make make_;
};

}  // namespace mlbench::pipeline
