// Transitional: the in-memory benchmarks' old front, now a thin alias of the
// one loader (DataLoader over an InMemoryDataset, pipeline/data_loader.h),
// kept only until vae, recom and translator call in_memory_loader; then deleted.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <vector>

#include "pipeline/data_loader.h"

namespace mlbench::pipeline {

struct PrefetchOptions {
  std::size_t batch_size = 1;
  int depth = 2;           // --prefetch
  bool drop_last = true;
};

template <class Batch>
class BatchPrefetcher {
 public:
  using Make = typename InMemoryDataset<Batch>::Make;
  BatchPrefetcher(const Sampler& sampler, PrefetchOptions options, Make make)
      : loader_(std::make_shared<InMemoryDataset<Batch>>(sampler.dataset_size(), std::move(make)),
                LoaderOptions{.batch_size = options.batch_size, .workers = options.depth > 0 ? 1 : 0,
                              .prefetch = options.depth, .drop_last = options.drop_last,
                              .shuffle = sampler.shuffled(), .seed = sampler.seed()}) {
    loader_.start();
  }
  Batch next() { return *loader_.next(); }
  void stop() { loader_.stop(); }
  long batches() const { return static_cast<long>(loader_.stats().batches()); }
  long epoch() const { return std::max<long>(1, loader_.epochs_started()) - 1; }
  double make_seconds() const { return loader_.build_seconds(); }

 private:
  DataLoader<Batch> loader_;
};

}  // namespace mlbench::pipeline
