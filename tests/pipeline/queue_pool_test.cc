// The loader's reorder queue (in-order delivery, the prefetch window, errors in
// place, stopping) and host buffer pool (buffers come back and are reused).
#include <future>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "pipeline/buffer_pool.h"
#include "pipeline/queue.h"

namespace mlbench::pipeline {
namespace {

TEST(ReorderQueue, DeliversInOrderWhateverTheFinishingOrder) {
  ReorderQueue<int> q(3, -1);
  EXPECT_EQ(q.claim(), 0);
  EXPECT_EQ(q.claim(), 1);
  EXPECT_EQ(q.claim(), 2);
  q.put(2, 20);
  q.put(0, 0);
  q.put(1, 10);
  int ready = -1;
  EXPECT_EQ(q.take(ready), 0);
  EXPECT_EQ(ready, 3);
  EXPECT_EQ(q.take(ready), 10);
  EXPECT_EQ(q.take(ready), 20);
  EXPECT_EQ(q.claimed(), 3);
}

TEST(ReorderQueue, ClaimWaitsForTheWindowAndStopReleasesIt) {
  ReorderQueue<int> q(1, -1);
  EXPECT_EQ(q.claim(), 0);
  auto blocked = std::async(std::launch::async, [&] { return q.claim(); });
  q.put(0, 7);
  int ready = 0;
  EXPECT_EQ(q.take(ready), 7);
  EXPECT_EQ(blocked.get(), 1);  // the window moved on
  auto stopped = std::async(std::launch::async, [&] { return q.claim(); });
  q.stop();
  EXPECT_EQ(stopped.get(), std::nullopt);
  EXPECT_THROW(q.take(ready), std::runtime_error);  // sequence 1 never finished
}

TEST(ReorderQueue, EndsAtEndAndCarriesErrorsInPlace) {
  ReorderQueue<int> q(4, 2);
  EXPECT_EQ(q.claim(), 0);
  EXPECT_EQ(q.claim(), 1);
  auto past_end = std::async(std::launch::async, [&] { return q.claim(); });
  q.fail(1, std::make_exception_ptr(std::invalid_argument("bad item")));
  q.put(0, 1);
  int ready = 0;
  EXPECT_EQ(q.take(ready), 1);
  EXPECT_THROW(q.take(ready), std::invalid_argument);
  q.stop();
  EXPECT_EQ(past_end.get(), std::nullopt);
}

TEST(BufferPool, ReturnedBuffersAreReusedUpToCapacity) {
  int allocations = 0;
  BufferPool pool([&](std::size_t bytes) {
    ++allocations;
    return default_host_allocator(bytes);
  });
  pool.set_capacity(1);
  void* first = nullptr;
  {
    HostBuffer a = pool.allocate(1000);
    first = a.data;
    EXPECT_EQ(a.bytes, 1000u);
  }
  HostBuffer b = pool.allocate(1000);
  EXPECT_EQ(b.data, first);
  EXPECT_EQ(allocations, 1);
  HostBuffer c = pool.allocate(2000);  // another size: a new buffer
  EXPECT_EQ(allocations, 2);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c.data) % 64, 0u);
}

}  // namespace
}  // namespace mlbench::pipeline
