// The host buffer pool: memory for whole batches, handed back to the pool when
// the consumer lets go of a batch and reused for a later one (a fresh 150 MB
// allocation per batch would pay its page faults again); and the read buffers
// that read-ahead (pipeline/read_ahead.h) lands files in, reused the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace mlbench::pipeline {

// Host memory for a batch. `owner` keeps it alive (the torch adapter hands out
// pinned tensors' storage here when CUDA is present).
struct HostBuffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<void> owner;
};
using HostAllocator = std::function<HostBuffer(std::size_t bytes)>;
// Plain 64-byte aligned host memory.
HostBuffer default_host_allocator(std::size_t bytes);

class BufferPool {
 public:
  explicit BufferPool(HostAllocator allocator = default_host_allocator);
  // How many free buffers the pool keeps (more are freed when returned).
  void set_capacity(std::size_t buffers);
  // A buffer of `bytes`, reused when a free one has that size; it returns to
  // the pool (or is freed when the pool is gone or full) once its last owner
  // lets go. Thread-safe.
  HostBuffer allocate(std::size_t bytes);
  // Straight from the allocator, never pooled (a buffer kept for the whole run).
  HostBuffer allocate_unpooled(std::size_t bytes) const { return allocator_(bytes); }

 private:
  struct Free {
    std::mutex mu;
    std::vector<HostBuffer> buffers;
    std::size_t capacity = 4;
  };
  HostAllocator allocator_;
  std::shared_ptr<Free> free_ = std::make_shared<Free>();
};

// Byte buffers for files read ahead of decoding: handed out as shared pointers
// that come back to the pool, their capacity kept, when the last owner lets go
// (one the item cache admits stays with it). A buffer reused keeps its pages,
// so a read lands in memory already faulted in. Thread-safe.
class ReadBufferPool {
 public:
  using Buffer = std::vector<std::uint8_t>;
  // Keeps at most `capacity` free buffers (more are freed when returned).
  explicit ReadBufferPool(std::size_t capacity);
  // An empty buffer (size 0), with the capacity it had when last used.
  std::shared_ptr<Buffer> acquire();
  std::size_t free_buffers() const;

 private:
  struct Free {
    mutable std::mutex mu;
    std::vector<std::unique_ptr<Buffer>> buffers;
    std::size_t capacity = 0;
  };
  std::shared_ptr<Free> free_ = std::make_shared<Free>();
};

}  // namespace mlbench::pipeline
