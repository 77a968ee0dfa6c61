#include "pipeline/item_cache.h"

#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>

#include "core/byte_size.h"

namespace mlbench::pipeline {

namespace {
constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();
}

CacheCapacity parse_cache_size(const std::string& text) {
  auto bad = [&] {
    return std::invalid_argument("--cache-size '" + text +
                                 "': expected items (1000), a share of the dataset (40%) or bytes (2GiB, 500MB)");
  };
  if (text.empty()) throw bad();
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw bad();
  }
  if (!(value >= 0) || !std::isfinite(value)) throw bad();
  const std::string unit = text.substr(pos);
  CacheCapacity c;
  if (unit.empty()) {
    if (value != std::floor(value)) throw bad();
    c.unit = CacheCapacity::Unit::Items;
    c.value = value;
    return c;
  }
  if (unit == "%") {
    if (value > 100) throw bad();
    c.unit = CacheCapacity::Unit::Fraction;
    c.value = value / 100.0;
    return c;
  }
  try {
    c.value = static_cast<double>(core::parse_byte_size(text));
  } catch (const std::invalid_argument&) {
    throw bad();
  }
  c.unit = CacheCapacity::Unit::Bytes;
  return c;
}

ItemCache::ItemCache(std::uint64_t max_items, std::uint64_t max_bytes) : max_items_(max_items), max_bytes_(max_bytes) {
  full_ = max_items_ == 0 || max_bytes_ == 0;
}

ItemCache ItemCache::from_capacity(const CacheCapacity& capacity, std::size_t items) {
  switch (capacity.unit) {
    case CacheCapacity::Unit::Items:
      return ItemCache(static_cast<std::uint64_t>(capacity.value), kUnlimited);
    case CacheCapacity::Unit::Bytes:
      return ItemCache(kUnlimited, static_cast<std::uint64_t>(capacity.value));
    case CacheCapacity::Unit::Fraction:
      // Rounded down: "x of the dataset" never means more items than x * N.
      return ItemCache(static_cast<std::uint64_t>(std::floor(capacity.value * static_cast<double>(items) + 1e-9)),
                       kUnlimited);
  }
  return ItemCache(0, 0);
}

std::shared_ptr<const Bytes> ItemCache::get(std::size_t index) {
  {
    std::shared_lock lock(mu_);
    auto it = items_.find(index);
    if (it != items_.end()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

std::shared_ptr<const Bytes> ItemCache::peek(std::size_t index) const {
  std::shared_lock lock(mu_);
  auto it = items_.find(index);
  return it == items_.end() ? nullptr : it->second;
}

bool ItemCache::put(std::size_t index, std::shared_ptr<const Bytes> bytes) {
  if (admit_ && !admit_(index)) return false;
  {
    std::shared_lock lock(mu_);
    if (full_) return false;
  }
  std::unique_lock lock(mu_);
  if (items_.size() >= max_items_) {
    full_ = true;
    return false;
  }
  if (items_.count(index)) return false;
  // A byte-limited cache skips an item that does not fit but keeps admitting
  // smaller ones: what fits in the first epoch stays, nothing is ever evicted.
  if (bytes->size() > max_bytes_ - bytes_) return false;
  bytes_ += bytes->size();
  items_.emplace(index, std::move(bytes));
  if (items_.size() >= max_items_ || bytes_ >= max_bytes_) full_ = true;
  return true;
}

std::uint64_t ItemCache::items() const {
  std::shared_lock lock(mu_);
  return items_.size();
}

std::uint64_t ItemCache::bytes() const {
  std::shared_lock lock(mu_);
  return bytes_;
}

}  // namespace mlbench::pipeline
