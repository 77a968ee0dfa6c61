// Which dataset indices an epoch visits, in which order: sequential, or a
// fresh permutation per epoch from a seed; optionally one shard of it
// (distributed training). Pure and deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mlbench::pipeline {

class Sampler {
 public:
  // `size` items; shard `shard_id` of `num_shards` takes every num_shards-th
  // position of the epoch order (so shards are disjoint and cover every index once).
  Sampler(std::size_t size, bool shuffle, std::uint64_t seed, int num_shards = 1, int shard_id = 0);

  // The indices of epoch `epoch` (0-based) for this shard.
  std::vector<std::size_t> epoch_indices(long epoch) const;
  // How many indices epoch_indices returns.
  std::size_t shard_size() const;
  std::size_t dataset_size() const { return size_; }
  bool shuffled() const { return shuffle_; }
  std::uint64_t seed() const { return seed_; }

 private:
  std::size_t size_;
  bool shuffle_;
  std::uint64_t seed_;
  int num_shards_;
  int shard_id_;
};

// What a loader asks a source that plans its own epoch order (ItemSource::epoch_order,
// e.g. tar shards read sequentially): the epoch, the loader's seed and shuffle flag, its
// batch size and its lanes (the loader's workers, at least 1: streams read side by side).
struct EpochOrderRequest {
  long epoch = 0;
  std::uint64_t seed = 0;
  bool shuffle = true;
  std::size_t batch_size = 1;
  int lanes = 1;
};

// splitmix64 step: the pipeline's deterministic seeding primitive.
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b);

}  // namespace mlbench::pipeline
