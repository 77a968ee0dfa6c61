#include "pipeline/batch_prefetcher.h"

#include <atomic>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

namespace mlbench::pipeline {
namespace {

using Indices = std::vector<std::size_t>;
Indices identity(const Indices& i) { return i; }

Indices concat(BatchPrefetcher<Indices>& p, int batches) {
  Indices all;
  for (int b = 0; b < batches; ++b) {
    const Indices x = p.next();
    all.insert(all.end(), x.begin(), x.end());
  }
  return all;
}

TEST(BatchPrefetcher, FollowsTheSamplersEpochsInOrder) {
  for (int depth : {0, 1, 3}) {
    const Sampler sampler(12, true, 7);
    BatchPrefetcher<Indices> p(sampler, {.batch_size = 4, .depth = depth}, identity);
    Indices expected = sampler.epoch_indices(0);
    const Indices e1 = sampler.epoch_indices(1);
    expected.insert(expected.end(), e1.begin(), e1.end());
    EXPECT_EQ(concat(p, 6), expected) << "depth " << depth;
    EXPECT_EQ(p.batches(), 6);
  }
}

TEST(BatchPrefetcher, DropLastSkipsTheShortBatchKeepLastReturnsIt) {
  const Sampler sampler(10, false, 0);
  BatchPrefetcher<Indices> drop(sampler, {.batch_size = 4, .depth = 2, .drop_last = true}, identity);
  EXPECT_EQ(drop.next(), (Indices{0, 1, 2, 3}));
  EXPECT_EQ(drop.next(), (Indices{4, 5, 6, 7}));
  EXPECT_EQ(drop.next(), (Indices{0, 1, 2, 3}));  // 8, 9 dropped: next epoch
  BatchPrefetcher<Indices> keep(sampler, {.batch_size = 4, .depth = 0, .drop_last = false}, identity);
  keep.next();
  keep.next();
  EXPECT_EQ(keep.next(), (Indices{8, 9}));
  EXPECT_EQ(keep.next(), (Indices{0, 1, 2, 3}));
  EXPECT_EQ(keep.epoch(), 1);
}

TEST(BatchPrefetcher, EveryItemOncePerEpochWhenShuffled) {
  const Sampler sampler(100, true, 3);
  BatchPrefetcher<Indices> p(sampler, {.batch_size = 10, .depth = 4}, identity);
  const Indices epoch = concat(p, 10);
  EXPECT_EQ(std::set<std::size_t>(epoch.begin(), epoch.end()).size(), 100u);
}

TEST(BatchPrefetcher, BuildsAheadAtMostDepthBatches) {
  std::atomic<int> made{0};
  BatchPrefetcher<Indices> p(Sampler(1000, false, 0), {.batch_size = 1, .depth = 3}, [&](const Indices& i) {
    ++made;
    return i;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (made.load() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(made.load(), 3);  // the queue is full: the producer waits
  p.next();
  while (made.load() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(made.load(), 4);
}

TEST(BatchPrefetcher, AnErrorInMakeReachesTheConsumer) {
  int calls = 0;
  BatchPrefetcher<Indices> p(Sampler(8, false, 0), {.batch_size = 2, .depth = 2}, [&](const Indices& i) {
    if (++calls == 2) throw std::runtime_error("bad line 17");
    return i;
  });
  EXPECT_EQ(p.next(), (Indices{0, 1}));
  try {
    p.next();
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "bad line 17");
  }
}

TEST(BatchPrefetcher, StopsWhileTheProducerWaitsAndRejectsBadSizes) {
  auto p = std::make_unique<BatchPrefetcher<Indices>>(Sampler(100, false, 0), PrefetchOptions{.batch_size = 5, .depth = 1},
                                                      identity);
  p.reset();  // must not hang with a full queue
  EXPECT_THROW(BatchPrefetcher<Indices>(Sampler(3, false, 0), {.batch_size = 4}, identity), std::invalid_argument);
  EXPECT_THROW(BatchPrefetcher<Indices>(Sampler(3, false, 0), {.batch_size = 0}, identity), std::invalid_argument);
  EXPECT_NO_THROW(BatchPrefetcher<Indices>(Sampler(3, false, 0), {.batch_size = 4, .drop_last = false}, identity));
}

}  // namespace
}  // namespace mlbench::pipeline
