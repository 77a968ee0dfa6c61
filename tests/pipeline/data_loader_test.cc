// The one loader over an in-memory dataset: epochs in sampler order, drop_last,
// prefetch bounds, errors reaching the consumer, stopping. (These were the
// BatchPrefetcher's tests; a worker with --prefetch N is what it was with depth N.)
#include "pipeline/data_loader.h"

#include <atomic>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "pipeline/loader_report.h"

namespace mlbench::pipeline {
namespace {

using Indices = std::vector<std::size_t>;
Indices identity(const Indices& i) { return i; }

// One background builder when prefetch > 0, as the in-memory benchmarks run it.
LoaderOptions in_memory(std::size_t batch_size, int prefetch, bool shuffle, std::uint64_t seed, bool drop_last = true) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.prefetch = prefetch;
  o.workers = prefetch > 0 ? 1 : 0;
  o.shuffle = shuffle;
  o.seed = seed;
  o.drop_last = drop_last;
  return o;
}

std::shared_ptr<Dataset<Indices>> dataset(std::size_t n, InMemoryDataset<Indices>::Make make = identity) {
  return std::make_shared<InMemoryDataset<Indices>>(n, std::move(make));
}

Indices concat(DataLoader<Indices>& p, int batches) {
  Indices all;
  for (int b = 0; b < batches; ++b) {
    const Indices x = *p.next();
    all.insert(all.end(), x.begin(), x.end());
  }
  return all;
}

TEST(DataLoader, FollowsTheSamplersEpochsInOrder) {
  for (int depth : {0, 1, 3}) {
    const Sampler sampler(12, true, 7);
    DataLoader<Indices> p(dataset(12), in_memory(4, depth, true, 7));
    Indices expected = sampler.epoch_indices(0);
    const Indices e1 = sampler.epoch_indices(1);
    expected.insert(expected.end(), e1.begin(), e1.end());
    EXPECT_EQ(concat(p, 6), expected) << "depth " << depth;
    EXPECT_EQ(p.stats().batches(), 6);
  }
}

TEST(DataLoader, ManyWorkersStillDeliverInSamplerOrder) {
  const Sampler sampler(40, true, 11);
  LoaderOptions o = in_memory(4, 8, true, 11);
  o.workers = 4;
  DataLoader<Indices> p(dataset(40), o);
  EXPECT_EQ(concat(p, 10), sampler.epoch_indices(0));
}

TEST(DataLoader, DropLastSkipsTheShortBatchKeepLastReturnsIt) {
  DataLoader<Indices> drop(dataset(10), in_memory(4, 2, false, 0, true));
  EXPECT_EQ(*drop.next(), (Indices{0, 1, 2, 3}));
  EXPECT_EQ(*drop.next(), (Indices{4, 5, 6, 7}));
  EXPECT_EQ(*drop.next(), (Indices{0, 1, 2, 3}));  // 8, 9 dropped: next epoch
  DataLoader<Indices> keep(dataset(10), in_memory(4, 0, false, 0, false));
  keep.next();
  keep.next();
  EXPECT_EQ(*keep.next(), (Indices{8, 9}));
  EXPECT_EQ(*keep.next(), (Indices{0, 1, 2, 3}));
  EXPECT_EQ(keep.epochs_started() - 1, 1);
}

TEST(DataLoader, EveryItemOncePerEpochWhenShuffled) {
  DataLoader<Indices> p(dataset(100), in_memory(10, 4, true, 3));
  const Indices epoch = concat(p, 10);
  EXPECT_EQ(std::set<std::size_t>(epoch.begin(), epoch.end()).size(), 100u);
}

TEST(DataLoader, BuildsAheadAtMostDepthBatches) {
  std::atomic<int> made{0};
  DataLoader<Indices> p(dataset(1000,
                                [&](const Indices& i) {
                                  ++made;
                                  return i;
                                }),
                        in_memory(1, 3, false, 0));
  p.start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (made.load() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(made.load(), 3);  // the queue is full: the producer waits
  p.next();
  while (made.load() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(made.load(), 4);
}

TEST(DataLoader, AnErrorInMakeReachesTheConsumer) {
  std::atomic<int> calls{0};
  DataLoader<Indices> p(dataset(8,
                                [&](const Indices& i) {
                                  if (++calls == 2) throw std::runtime_error("bad line 17");
                                  return i;
                                }),
                        in_memory(2, 2, false, 0));
  EXPECT_EQ(*p.next(), (Indices{0, 1}));
  try {
    p.next();
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "bad line 17");
  }
}

TEST(DataLoader, StopsWhileTheProducerWaitsAndRejectsBadSizes) {
  auto p = std::make_unique<DataLoader<Indices>>(dataset(100), in_memory(5, 1, false, 0));
  p->start();
  p.reset();  // must not hang with a full queue
  EXPECT_THROW(DataLoader<Indices>(dataset(3), in_memory(4, 2, false, 0)), std::invalid_argument);
  EXPECT_THROW(DataLoader<Indices>(dataset(3), in_memory(0, 2, false, 0)), std::invalid_argument);
  EXPECT_NO_THROW(DataLoader<Indices>(dataset(3), in_memory(4, 2, false, 0, false)));
}

TEST(DataLoader, PrefetchMeansBatchesBuiltAheadEverywhere) {
  EXPECT_EQ(effective_prefetch(-1, 0), 2);  // default: 2 x workers
  EXPECT_EQ(effective_prefetch(-1, 4), 8);
  EXPECT_EQ(effective_prefetch(2, 4), 4);   // never fewer than the workers
  EXPECT_EQ(effective_prefetch(0, 4), 0);   // built on the consumer's thread
  DataLoader<Indices> inline_loader(dataset(8), in_memory(2, 0, false, 0));
  EXPECT_EQ(inline_loader.builders(), 0);
  DataLoader<Indices> ahead(dataset(8), in_memory(2, 3, false, 0));
  EXPECT_EQ(ahead.builders(), 1);
  EXPECT_EQ(ahead.options().prefetch, 3);
}

TEST(DataLoader, InMemoryLoaderShufflesEveryItemOncePerEpoch) {
  auto p = in_memory_loader<Indices>(12, 4, 2, 5, identity);
  EXPECT_EQ(p->builders(), 1);
  EXPECT_EQ(concat(*p, 3), Sampler(12, true, 5).epoch_indices(0));
  EXPECT_EQ(in_memory_loader<Indices>(12, 4, 0, 5, identity)->builders(), 0);
}

TEST(DataLoader, InMemoryReportBlock) {
  EXPECT_EQ(in_memory_report<Indices>(nullptr, "x", 8), (nlohmann::json{{"source", "synthetic"}}));
  DataLoader<Indices> p(dataset(8), in_memory(2, 2, false, 0));
  for (int i = 0; i < 5; ++i) p.next();
  const auto j = in_memory_report(&p, "data/mnist-small", 8);
  EXPECT_EQ(j["source"], "in-memory");
  EXPECT_EQ(j["dataset"], "data/mnist-small");
  EXPECT_EQ(j["items"], 8);
  EXPECT_EQ(j["prefetch"], 2);
  EXPECT_EQ(j["batches"], 5);
  EXPECT_GE(j["epochs"].get<long>(), 2);
  EXPECT_GE(j["make_s"].get<double>(), 0.0);
}

}  // namespace
}  // namespace mlbench::pipeline
