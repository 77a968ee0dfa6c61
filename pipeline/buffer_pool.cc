#include "pipeline/buffer_pool.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace mlbench::pipeline {

HostBuffer default_host_allocator(std::size_t bytes) {
  const std::size_t size = std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, size);
  if (!p) throw std::bad_alloc();
  return HostBuffer{p, bytes, std::shared_ptr<void>(p, std::free)};
}

BufferPool::BufferPool(HostAllocator allocator)
    : allocator_(allocator ? std::move(allocator) : HostAllocator(default_host_allocator)) {}

void BufferPool::set_capacity(std::size_t buffers) {
  std::lock_guard<std::mutex> lock(free_->mu);
  free_->capacity = buffers;
}

HostBuffer BufferPool::allocate(std::size_t bytes) {
  HostBuffer raw;
  {
    std::lock_guard<std::mutex> lock(free_->mu);
    auto& v = free_->buffers;
    auto it = std::find_if(v.begin(), v.end(), [&](const HostBuffer& b) { return b.bytes == bytes; });
    if (it != v.end()) {
      raw = std::move(*it);
      v.erase(it);
    }
  }
  if (!raw.data) raw = allocator_(bytes);
  std::weak_ptr<Free> weak = free_;
  void* data = raw.data;
  auto owner = std::shared_ptr<void>(data, [weak, raw](void*) mutable {
    if (auto pool = weak.lock()) {
      std::lock_guard<std::mutex> lock(pool->mu);
      if (pool->buffers.size() < pool->capacity) pool->buffers.push_back(std::move(raw));
    }
  });
  return HostBuffer{data, bytes, std::move(owner)};
}

ReadBufferPool::ReadBufferPool(std::size_t capacity) { free_->capacity = capacity; }

std::shared_ptr<ReadBufferPool::Buffer> ReadBufferPool::acquire() {
  std::unique_ptr<Buffer> raw;
  {
    std::lock_guard<std::mutex> lock(free_->mu);
    if (!free_->buffers.empty()) {
      raw = std::move(free_->buffers.back());
      free_->buffers.pop_back();
    }
  }
  if (!raw) raw = std::make_unique<Buffer>();
  raw->clear();
  std::weak_ptr<Free> weak = free_;
  return std::shared_ptr<Buffer>(raw.release(), [weak](Buffer* b) {
    std::unique_ptr<Buffer> owned(b);
    if (auto pool = weak.lock()) {
      std::lock_guard<std::mutex> lock(pool->mu);
      if (pool->buffers.size() < pool->capacity) pool->buffers.push_back(std::move(owned));
    }
  });
}

std::size_t ReadBufferPool::free_buffers() const {
  std::lock_guard<std::mutex> lock(free_->mu);
  return free_->buffers.size();
}

}  // namespace mlbench::pipeline
