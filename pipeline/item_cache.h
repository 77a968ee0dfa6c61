// A never-evicting item cache (CoorDL's MinIO policy): items are admitted while
// capacity remains (in items or bytes) and are never replaced, so a cache
// holding a fraction x of the dataset gets exactly x of the items as hits in
// every epoch after the first, whatever the access order. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mlbench::pipeline {

using Bytes = std::vector<std::uint8_t>;

// `--cache-size`: "0" (off), "1000" (items), "40%" (of the dataset's items), "2GiB"/"500MB"/"64KiB" (bytes).
struct CacheCapacity {
  enum class Unit { Items, Bytes, Fraction };
  Unit unit = Unit::Items;
  double value = 0;  // items, bytes, or fraction in [0, 1]
  bool enabled() const { return value > 0; }
};
// Throws std::invalid_argument with a message naming the text.
CacheCapacity parse_cache_size(const std::string& text);

class ItemCache {
 public:
  // Limits: at most `max_items` items and `max_bytes` bytes (either may be unlimited).
  ItemCache(std::uint64_t max_items, std::uint64_t max_bytes);
  // Resolves a capacity against a dataset of `items` items (Fraction: of the items).
  static ItemCache from_capacity(const CacheCapacity& capacity, std::size_t items);

  // The cached bytes, or nullptr (a miss). Counts the hit or the miss.
  std::shared_ptr<const Bytes> get(std::size_t index);
  // Admits the item when it fits and is not cached yet; never evicts. Returns whether admitted.
  bool put(std::size_t index, std::shared_ptr<const Bytes> bytes);
  // The cached bytes, or nullptr, counting neither (answers to peers: pipeline/remedies/peer_cache.h).
  std::shared_ptr<const Bytes> peek(std::size_t index) const;
  // From now on only items with admit(index) true are admitted (a partitioned cache keeps its
  // node's partition). Set it before the cache is shared between threads.
  void set_admit(std::function<bool(std::size_t)> admit) { admit_ = std::move(admit); }

  std::uint64_t hits() const { return hits_.load(); }
  std::uint64_t misses() const { return misses_.load(); }
  std::uint64_t items() const;
  std::uint64_t bytes() const;
  std::uint64_t max_items() const { return max_items_; }
  std::uint64_t max_bytes() const { return max_bytes_; }

 private:
  std::uint64_t max_items_;
  std::uint64_t max_bytes_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::size_t, std::shared_ptr<const Bytes>> items_;
  std::uint64_t bytes_ = 0;
  bool full_ = false;                       // once full, get() misses skip the write lock entirely
  std::function<bool(std::size_t)> admit_;  // empty: every item
  std::atomic<std::uint64_t> hits_{0};
  std::atomic<std::uint64_t> misses_{0};
};

}  // namespace mlbench::pipeline
