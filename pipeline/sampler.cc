#include "pipeline/sampler.h"

#include <numeric>
#include <random>
#include <stdexcept>

#include "core/rng.h"

namespace mlbench::pipeline {

std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  // b folded into a (boost::hash_combine's shape, golden-ratio constant
  // included), then scrambled by one splitmix64 step of core's generator. The
  // step adds that constant itself, so the seed starts one increment below:
  // the orders stay those the tests and earlier runs pinned.
  constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  return core::Rng((a ^ (b + kGolden + (a << 6) + (a >> 2))) - kGolden).next();
}

Sampler::Sampler(std::size_t size, bool shuffle, std::uint64_t seed, int num_shards, int shard_id)
    : size_(size), shuffle_(shuffle), seed_(seed), num_shards_(num_shards), shard_id_(shard_id) {
  if (num_shards < 1 || shard_id < 0 || shard_id >= num_shards) {
    throw std::invalid_argument("sampler: shard_id must be in [0, num_shards)");
  }
}

std::size_t Sampler::shard_size() const {
  const auto n = static_cast<std::size_t>(num_shards_), s = static_cast<std::size_t>(shard_id_);
  return size_ / n + (s < size_ % n ? 1 : 0);
}

std::vector<std::size_t> Sampler::epoch_indices(long epoch) const {
  std::vector<std::size_t> order(size_);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (shuffle_) {
    // Every shard derives the same permutation from (seed, epoch), so shards agree.
    std::mt19937_64 rng(mix_seed(seed_, static_cast<std::uint64_t>(epoch)));
    for (std::size_t i = size_; i > 1; --i) {
      std::uniform_int_distribution<std::size_t> pick(0, i - 1);
      std::swap(order[i - 1], order[pick(rng)]);
    }
  }
  if (num_shards_ == 1) return order;
  std::vector<std::size_t> shard;
  shard.reserve(shard_size());
  for (std::size_t i = static_cast<std::size_t>(shard_id_); i < size_; i += static_cast<std::size_t>(num_shards_)) {
    shard.push_back(order[i]);
  }
  return shard;
}

}  // namespace mlbench::pipeline
