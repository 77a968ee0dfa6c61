// Unit tests of read-ahead (pipeline/read_ahead.h, --io-depth): reads in the
// sampler's order, bounded depth, item-cache hits issue no read, a read's error
// reaches the worker that takes the item, a stop with reads in flight ends
// without a hang; and the loader gives the same batches with and without it.
// No test depends on speed: gates, not sleeps, decide what is in flight.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "datasets/fake_imagenet.h"
#include "pipeline/loader.h"
#include "pipeline/read_ahead.h"
#include "stall/page_cache.h"
#include "tests/support/jpeg_folder.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace mlbench::pipeline;
using mlbench::testing_support::TempDir;

namespace {

// Long enough that only a hang reaches it (a loaded CI box included).
constexpr auto kHang = std::chrono::seconds(60);

// Holds callers while closed; counts those that arrived.
class Gate {
 public:
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Counts the caller as arrived, then waits while the gate is closed.
  void pass() {
    std::unique_lock<std::mutex> lock(mu_);
    ++arrived_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  // Waits until `n` callers arrived; false on a hang.
  bool wait_arrived(std::size_t n) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kHang, [&] { return arrived_ >= n; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool open_ = true;
  std::size_t arrived_ = 0;
};

// An in-memory source whose item i is the bytes "item i". Records the order of
// fetches, how many run at once, and can hold reads at a gate or fail one item.
class RecordingSource : public ItemSource {
 public:
  explicit RecordingSource(std::size_t n) : n_(n) {}
  std::size_t size() const override { return n_; }
  std::int64_t label(std::size_t i) const override { return static_cast<std::int64_t>(i % 2); }
  Encoding encoding() const override { return Encoding::Jpeg; }
  std::string describe(std::size_t i) const override { return "item " + std::to_string(i); }
  void fetch(std::size_t i, Bytes& out) const override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      order_.push_back(i);
      max_running_ = std::max(max_running_, ++running_);
    }
    gate_.pass();
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    if (i == fail_) throw DataError("cannot read " + describe(i) + ": injected failure");
    const std::string s = "item " + std::to_string(i);
    out.assign(s.begin(), s.end());
  }

  void close_gate() { gate_.close(); }
  void open_gate() { gate_.open(); }
  void fail(std::size_t i) { fail_ = i; }
  // Even items are "in the page cache": fetch_if_cached serves them.
  void cache_even() { cache_even_ = true; }
  bool fetch_if_cached(std::size_t i, Bytes& out) const override {
    if (!cache_even_ || i % 2 != 0) return false;
    const std::string s = "item " + std::to_string(i);
    out.assign(s.begin(), s.end());
    return true;
  }
  // Waits until `n` fetches have started; false on a hang.
  bool wait_started(std::size_t n) const { return gate_.wait_arrived(n); }
  std::vector<std::size_t> order() const {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }
  int max_running() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_running_;
  }

 private:
  std::size_t n_;
  std::size_t fail_ = static_cast<std::size_t>(-1);
  mutable std::mutex mu_;
  mutable std::vector<std::size_t> order_;
  mutable int running_ = 0, max_running_ = 0;
  mutable Gate gate_;
  bool cache_even_ = false;
};

// A real ImageFolder whose reads wait at a gate (and are counted when they start).
class GatedFolder : public ItemSource {
 public:
  explicit GatedFolder(const fs::path& root) : folder_(root) {}
  std::size_t size() const override { return folder_.size(); }
  std::int64_t label(std::size_t i) const override { return folder_.label(i); }
  Encoding encoding() const override { return folder_.encoding(); }
  std::string describe(std::size_t i) const override { return folder_.describe(i); }
  void fetch(std::size_t i, Bytes& out) const override {
    gate_.pass();
    folder_.fetch(i, out);
  }
  void close_gate() { gate_.close(); }
  void open_gate() { gate_.open(); }
  bool wait_started(std::size_t n) const { return gate_.wait_arrived(n); }

 private:
  ImageFolderReader folder_;
  mutable Gate gate_;
};

std::string text(const FetchedItem& f) { return std::string(f.data->begin(), f.data->end()); }

// Every batch of one run: labels and pixel bytes, in order.
std::vector<std::pair<std::vector<std::int64_t>, std::string>> run_loader(std::shared_ptr<const ItemSource> source,
                                                                          LoaderConfig c,
                                                                          std::int64_t* corrupt = nullptr) {
  Loader loader(std::move(source), c);
  std::vector<std::pair<std::vector<std::int64_t>, std::string>> out;
  while (auto b = loader.next()) {
    out.emplace_back(b->labels, std::string(static_cast<const char*>(b->data.data), b->data.bytes));
  }
  if (corrupt) *corrupt = loader.stats().corrupt();
  return out;
}

// The loader settings of the same-batches tests: 2 epochs of batches of 5, 16 px.
LoaderConfig same_batches_config(int workers, std::ostream& warnings) {
  LoaderConfig c;
  c.batch_size = 5;
  c.workers = workers;
  c.transform.image_size = 16;
  c.max_epochs = 2;
  c.seed = 11;
  c.warnings = &warnings;
  return c;
}

// `c` serially, then reading ahead on `engine` at depths 1, 3 and 8: the same batches, the same
// corrupt files met. A folder of 24 items with one corrupt file. Returns the serial batches;
// leaves `c` on `engine`.
std::vector<std::pair<std::vector<std::int64_t>, std::string>> expect_same_batches(
    std::shared_ptr<const ItemSource> source, LoaderConfig& c, IoEngine engine) {
  c.io_depth = 0;
  std::int64_t corrupt_serial = 0, corrupt_ahead = 0;
  const auto serial = run_loader(source, c, &corrupt_serial);
  c.io_engine = engine;
  for (int depth : {1, 3, 8}) {
    c.io_depth = depth;
    EXPECT_EQ(run_loader(source, c, &corrupt_ahead), serial)
        << c.workers << " workers, io depth " << depth << ", " << to_string(engine);
    EXPECT_EQ(corrupt_ahead, corrupt_serial);
  }
  EXPECT_EQ(serial.size(), 8u);  // 24 items, batches of 5 (4 dropped per epoch), 2 epochs
  EXPECT_GE(corrupt_serial, 1);  // the corrupt file was met (unless dropped in both epochs)
  return serial;
}

}  // namespace

TEST(ReadAhead, ReadsInTheSamplersOrderAndHandsItemsOutInOrder) {
  const std::vector<std::size_t> items{7, 3, 9, 0, 5, 1, 8, 2};
  {
    // One I/O thread: the reads themselves happen in the stream's order.
    auto source = std::make_shared<RecordingSource>(10);
    ReadAhead ra(source, nullptr, 1, true, nullptr, nullptr);
    ReadStream stream(ra, items, 4, 0);
    for (std::size_t k = 0; k < items.size(); ++k) EXPECT_EQ(text(stream.take()), "item " + std::to_string(items[k]));
    EXPECT_EQ(source->order(), items);
  }
  {
    // Several: reads finish in any order, the worker still takes them in order.
    auto source = std::make_shared<RecordingSource>(10);
    ReadAhead ra(source, nullptr, 4, true, nullptr, nullptr);
    ReadStream stream(ra, items, 4, 0);
    for (std::size_t k = 0; k < items.size(); ++k) EXPECT_EQ(text(stream.take()), "item " + std::to_string(items[k]));
    EXPECT_THROW(stream.take(), std::logic_error);
    EXPECT_EQ(ra.reads_issued(), static_cast<std::int64_t>(items.size()));
  }
}

TEST(ReadAhead, KeepsAtMostTheWindowIssuedAndIoDepthRunning) {
  auto source = std::make_shared<RecordingSource>(20);
  source->close_gate();
  ReadAhead ra(source, nullptr, 3, true, nullptr, nullptr);
  std::vector<std::size_t> items(12);
  for (std::size_t i = 0; i < items.size(); ++i) items[i] = i;
  ReadStream stream(ra, items, 3, 0);
  ASSERT_TRUE(source->wait_started(3));
  // Three reads are held at the gate; nothing more was issued.
  EXPECT_EQ(ra.reads_issued(), 3);
  EXPECT_EQ(ra.max_outstanding(), 3);
  source->open_gate();
  for (std::size_t k = 0; k < items.size(); ++k) EXPECT_EQ(text(stream.take()), "item " + std::to_string(k));
  EXPECT_LE(ra.max_outstanding(), 3);
  EXPECT_LE(source->max_running(), 3);
  // Two workers' streams share the I/O threads: never more than io_depth reads run at once.
  auto shared = std::make_shared<RecordingSource>(40);
  ReadAhead two(shared, nullptr, 2, true, nullptr, nullptr);
  std::vector<std::size_t> a(20), b(20);
  for (std::size_t i = 0; i < 20; ++i) a[i] = i, b[i] = 20 + i;
  auto worker = [&](const std::vector<std::size_t>& v) {
    ReadStream s(two, v, 1, 0);
    for (std::size_t k = 0; k < v.size(); ++k) EXPECT_EQ(text(s.take()), "item " + std::to_string(v[k]));
  };
  std::thread t1(worker, a), t2(worker, b);
  t1.join();
  t2.join();
  EXPECT_LE(shared->max_running(), 2);
  EXPECT_LE(two.max_outstanding(), 2);
}

// Where a read's cycle goes beside the read: a queued read's wait for an I/O thread (here behind the
// one read held at the gate), a read item's wait for its worker, a worker's wake-up after the read
// it waited on. The sleeps only set lower bounds; the gates decide what is in flight.
TEST(ReadAhead, TimesAReadsWaitForAThreadAndItsItemsWaitForTheWorker) {
  using std::chrono::milliseconds;
  constexpr auto kHeld = milliseconds(30);
  auto source = std::make_shared<RecordingSource>(3);
  source->close_gate();
  PipelineStats stats;
  ReadAhead ra(source, nullptr, 1, true, &stats, nullptr);
  ReadStream stream(ra, {0, 1, 2}, 2, 0);  // items 0 and 1 issued; one I/O thread
  ASSERT_TRUE(source->wait_started(1));    // item 0 at the gate, item 1 queued behind it
  std::this_thread::sleep_for(kHeld);
  source->open_gate();
  EXPECT_EQ(text(stream.take()), "item 0");  // waited for its read: a wake-up
  // Item 2's read starts once item 1's has ended (one thread): item 1 is then read, not yet taken.
  ASSERT_TRUE(source->wait_started(3));
  std::this_thread::sleep_for(kHeld);
  EXPECT_EQ(text(stream.take()), "item 1");
  EXPECT_EQ(text(stream.take()), "item 2");
  EXPECT_EQ(stats.io_queue_waits(), 3);
  EXPECT_GE(stats.io_queue_wait_ns(), std::chrono::nanoseconds(kHeld).count());  // item 1's, behind item 0
  EXPECT_EQ(stats.io_wakes() + stats.io_item_waits(), 3);
  EXPECT_GE(stats.io_wakes(), 1);
  EXPECT_GE(stats.io_item_waits(), 1);
  EXPECT_GE(stats.io_item_wait_ns(), std::chrono::nanoseconds(kHeld).count());  // item 1's, read and not taken
  // Untimed (no stats): nothing is recorded.
  PipelineStats untimed;
  auto quiet = std::make_shared<RecordingSource>(2);
  ReadAhead off(quiet, nullptr, 1, false, &untimed, nullptr);
  ReadStream s2(off, {0, 1}, 2, 0);
  EXPECT_EQ(text(s2.take()), "item 0");
  EXPECT_EQ(text(s2.take()), "item 1");
  EXPECT_EQ(untimed.io_queue_waits() + untimed.io_wakes() + untimed.io_item_waits(), 0);
}

TEST(ReadAhead, ItemCacheHitsIssueNoRead) {
  auto source = std::make_shared<RecordingSource>(10);
  ItemCache cache(5, UINT64_MAX);
  for (std::size_t i : {1, 3, 5, 7, 9}) {
    const std::string s = "cached " + std::to_string(i);
    cache.put(i, std::make_shared<const Bytes>(s.begin(), s.end()));
  }
  ReadAhead ra(source, &cache, 2, true, nullptr, nullptr);
  ReadStream stream(ra, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 4, 0);
  for (std::size_t k = 0; k < 10; ++k) {
    const FetchedItem f = stream.take();
    EXPECT_EQ(f.from_cache, k % 2 == 1) << k;
    EXPECT_EQ(text(f), (k % 2 ? "cached " : "item ") + std::to_string(k));
  }
  // Two I/O threads may start their reads in either order (the order test uses one).
  auto read = source->order();
  std::sort(read.begin(), read.end());
  EXPECT_EQ(read, (std::vector<std::size_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(ra.reads_issued(), 5);
  EXPECT_EQ(cache.hits(), 5u);
  EXPECT_EQ(cache.misses(), 5u);
}

TEST(ReadAhead, ItemsTheSourceHasWithoutWaitingAreReadInTheWorker) {
  auto source = std::make_shared<RecordingSource>(10);
  source->cache_even();
  source->close_gate();  // the I/O threads' reads wait; the worker's own do not
  ReadAhead ra(source, nullptr, 2, true, nullptr, nullptr);
  ReadStream stream(ra, {0, 2, 4, 1, 3}, 5, 0);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(text(stream.take()), "item " + std::to_string(2 * k));
  source->open_gate();
  EXPECT_EQ(text(stream.take()), "item 1");
  EXPECT_EQ(text(stream.take()), "item 3");
  EXPECT_EQ(ra.inline_reads(), 3);
  EXPECT_EQ(ra.reads_issued(), 2);
  auto read = source->order();
  std::sort(read.begin(), read.end());
  EXPECT_EQ(read, (std::vector<std::size_t>{1, 3}));
}

TEST(ReadAhead, ImageFolderServesPageCachedFilesWithoutWaiting) {
  const TempDir tmp("read_ahead_nowait");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 1, 3);
  ImageFolderReader reader(root);
  for (std::size_t i = 0; i < reader.size(); ++i) {
    Bytes a, b;
    reader.fetch(i, a);  // now in the page cache
    ASSERT_TRUE(reader.fetch_if_cached(i, b)) << i;
    EXPECT_EQ(a, b) << i;
  }
  fs::remove(reader.path(1));
  Bytes none;
  EXPECT_FALSE(reader.fetch_if_cached(1, none));  // fetch() reports the error
  EXPECT_THROW(reader.fetch(1, none), DataError);
  reader.set_drop_after_read(true);
  EXPECT_FALSE(reader.fetch_if_cached(0, none));  // every read from storage
}

TEST(ReadAhead, HoldPageCacheDropsOnlyTheFilesItsReadsBroughtIn) {
  const TempDir tmp("hold_page_cache");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 1, 4);
  ImageFolderReader reader(root);
  ASSERT_EQ(reader.size(), 4u);
  std::vector<fs::path> files;
  for (std::size_t i = 0; i < reader.size(); ++i) files.push_back(reader.path(i));
  ::sync();  // just written: dirty pages are not dropped
  mlbench::stall::evict(files);
  if (mlbench::stall::residency(files).resident_pages != 0) {
    GTEST_SKIP() << "the page cache of " << tmp.path() << " cannot be dropped here (tmpfs?): nothing to hold";
  }
  const auto resident = [&](std::size_t i) { return mlbench::stall::residency({files[i]}).fraction(); };
  std::vector<Bytes> content(4);
  for (std::size_t i = 0; i < 2; ++i) read_file(files[i], content[i]);  // 0 and 1 resident, 2 and 3 not
  reader.set_hold_page_cache(true);
  for (std::size_t i = 0; i < 4; ++i) {
    Bytes b;
    EXPECT_EQ(reader.fetch_if_cached(i, b), i < 2) << i;
    reader.fetch(i, b);
    if (i >= 2) content[i] = b;
    EXPECT_EQ(b, content[i]) << i;
  }
  EXPECT_EQ(resident(0), 1.0);
  EXPECT_EQ(resident(1), 1.0);
  EXPECT_EQ(resident(2), 0.0);
  EXPECT_EQ(resident(3), 0.0);
  // A second epoch finds the same state, and reads the same bytes.
  for (std::size_t i = 0; i < 4; ++i) {
    Bytes b;
    reader.fetch(i, b);
    EXPECT_EQ(b, content[i]) << i;
  }
  EXPECT_EQ(mlbench::stall::residency(files).resident_pages, mlbench::stall::residency({files[0], files[1]}).pages);
  // Without the flag a read leaves its file resident: what the flag changes.
  reader.set_hold_page_cache(false);
  Bytes b;
  reader.fetch(2, b);
  EXPECT_EQ(resident(2), 1.0);
}

TEST(ReadAhead, AReadsErrorReachesTheWorkerThatTakesTheItem) {
  auto source = std::make_shared<RecordingSource>(10);
  source->fail(3);
  ReadAhead ra(source, nullptr, 2, true, nullptr, nullptr);
  ReadStream stream(ra, {0, 1, 2, 3, 4, 5}, 2, 0);
  for (int k = 0; k < 3; ++k) EXPECT_NO_THROW(stream.take());
  try {
    stream.take();
    FAIL() << "expected the read's DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "cannot read item 3: injected failure");
  }
  // The stream goes on after the error (the loader then reads a replacement).
  EXPECT_EQ(text(stream.take()), "item 4");
  EXPECT_EQ(text(stream.take()), "item 5");
}

TEST(ReadAhead, StopWithReadsInFlightWakesWaitersAndEnds) {
  auto source = std::make_shared<RecordingSource>(10);
  source->close_gate();
  auto ra = std::make_unique<ReadAhead>(source, nullptr, 1, true, nullptr, nullptr);
  // Worker A's read runs (held at the gate); worker B's waits in the queue behind it.
  auto a = std::make_unique<ReadStream>(*ra, std::vector<std::size_t>{0}, 1, 0);
  ASSERT_TRUE(source->wait_started(1));
  auto b_taken = std::async(std::launch::async, [&] {
    ReadStream b(*ra, {1, 2, 3}, 3, 1);
    b.take();
  });
  auto stopped = std::async(std::launch::async, [&] { ra->stop(); });
  // B is woken by the stop while A's read is still under way.
  ASSERT_EQ(b_taken.wait_for(kHang), std::future_status::ready);
  EXPECT_THROW(b_taken.get(), ReadAheadStopped);
  source->open_gate();
  ASSERT_EQ(stopped.wait_for(kHang), std::future_status::ready);
  stopped.get();
  EXPECT_EQ(source->order(), (std::vector<std::size_t>{0}));  // B's reads were dropped, never run
  EXPECT_EQ(text(a->take()), "item 0");                       // the read under way ended normally
  a.reset();
  ra.reset();
}

TEST(ReadAhead, AStreamLeftEarlyWithdrawsItsReads) {
  auto source = std::make_shared<RecordingSource>(10);
  ReadAhead ra(source, nullptr, 2, true, nullptr, nullptr);
  {
    ReadStream s(ra, {0, 1, 2, 3, 4, 5}, 4, 0);
    s.take();  // then the batch ends early (an error under --strict-data)
  }
  ReadStream next(ra, {6}, 4, 1);
  EXPECT_EQ(text(next.take()), "item 6");
  EXPECT_LE(ra.max_outstanding(), 4);
}

TEST(ReadAhead, AStreamLendsTheRoomOfItsWindowToTheNextBatch) {
  auto source = std::make_shared<RecordingSource>(10);
  source->close_gate();
  ReadAhead ra(source, nullptr, 4, true, nullptr, nullptr);
  ReadStream a(ra, {0, 1}, 3, 0);
  std::unique_ptr<ReadStream> b;
  std::vector<std::size_t> rooms;
  a.set_overflow([&](std::size_t room) {
    rooms.push_back(room);
    if (b) return b->issue_ahead(room);
    b = std::make_unique<ReadStream>(ra, std::vector<std::size_t>{2, 3, 4, 5}, 3, 1, room);
  });
  ASSERT_TRUE(b);  // batch 0 has 2 items for a window of 3: one read goes to batch 1 at once
  EXPECT_EQ(b->issued(), 1u);
  ASSERT_TRUE(source->wait_started(3));  // items 0, 1 and 2 in flight together
  source->open_gate();
  EXPECT_EQ(text(a.take()), "item 0");
  EXPECT_EQ(b->issued(), 2u);
  EXPECT_EQ(text(a.take()), "item 1");
  EXPECT_EQ(b->issued(), 3u);  // the whole window, before batch 1 takes anything
  EXPECT_EQ(rooms, (std::vector<std::size_t>{1, 2, 3}));
  for (int k = 2; k <= 5; ++k) EXPECT_EQ(text(b->take()), "item " + std::to_string(k));
  EXPECT_EQ(ra.max_outstanding(), 3);
}

TEST(ReadAhead, AStreamsWindowFollowsAnAdaptiveDepthAtEachTake) {
  auto source = std::make_shared<RecordingSource>(10);
  ReadAhead ra(source, nullptr, 8, true, nullptr, nullptr);
  std::atomic<std::size_t> window{2};
  ReadStream s(
      ra, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, [&] { return window.load(); }, 0);
  EXPECT_EQ(s.issued(), 2u);
  window = 5;  // the depth grew: the next take fills the larger window
  EXPECT_EQ(text(s.take()), "item 0");
  EXPECT_EQ(s.issued(), 6u);
  window = 1;  // it shrank: nothing more is issued until fewer than 1 is outstanding
  EXPECT_EQ(text(s.take()), "item 1");
  EXPECT_EQ(text(s.take()), "item 2");
  EXPECT_EQ(s.issued(), 6u);
  window = 0;  // read as 1: never less than one read ahead
  for (int k = 3; k <= 5; ++k) EXPECT_EQ(text(s.take()), "item " + std::to_string(k));
  EXPECT_EQ(s.issued(), 7u);
}

TEST(ReadAhead, AnAdaptiveDepthHasItsBoundsThreadsAndStartsAtItsStart) {
  auto source = std::make_shared<RecordingSource>(4);
  DepthControllerConfig adaptive;
  adaptive.bound = 32;
  ReadAhead ra(source, nullptr, 8, false, nullptr, nullptr, IoEngine::Threads, adaptive);
  EXPECT_TRUE(ra.adaptive());
  EXPECT_EQ(ra.io_threads(), 32);  // idle until the depth asks for them
  EXPECT_EQ(ra.io_depth(), 8);
  ASSERT_TRUE(ra.depth_controller());
  EXPECT_EQ(ra.depth_controller()->config().start, 8);
  EXPECT_FALSE(ra.depth_controller()->settled());
  ReadAhead fixed(source, nullptr, 8, false, nullptr, nullptr);
  EXPECT_FALSE(fixed.adaptive());
  EXPECT_FALSE(fixed.depth_controller());
  EXPECT_EQ(fixed.io_threads(), 8);
}

TEST(ReadAhead, OnlyADatasetOverHttpAdaptsItsDepth) {
  // --io-depth not given (adapt_io_depth) over local files: the fixed default, as before.
  const TempDir tmp("read_ahead_not_adaptive");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 2, 6);
  LoaderConfig c;
  c.batch_size = 4;
  c.workers = 2;
  c.transform.image_size = 16;
  c.max_epochs = 1;
  c.io_engine = IoEngine::Threads;
  c.adapt_io_depth = true;
  Loader loader(std::make_shared<ImageFolderReader>(root), c);
  while (loader.next()) {
  }
  const auto report = loader.to_json();
  EXPECT_EQ(report.at("io_depth"), kDefaultIoDepth);
  EXPECT_EQ(report.at("read_ahead").at("io_threads"), kDefaultIoDepth);
  EXPECT_EQ(report.at("read_ahead").at("window_per_worker"), kDefaultIoDepth / 2);
  EXPECT_TRUE(report.at("read_ahead").at("adaptive").is_null());
}

TEST(ReadAhead, TheLoaderReadsAWorkersNextBatchWhileItsBatchIsStillReading) {
  const TempDir tmp("read_ahead_next_batch");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 1, 6);
  auto source = std::make_shared<GatedFolder>(root);
  LoaderConfig c;
  c.batch_size = 1;  // a batch of one item: any second read in flight is the next batch's
  c.workers = 1;
  c.prefetch = 4;
  c.io_depth = 4;
  c.transform.image_size = 16;
  c.max_epochs = 1;
  c.seed = 3;
  source->close_gate();
  auto batches = std::async(std::launch::async, [&] { return run_loader(source, c); });
  const bool two_in_flight = source->wait_started(2);  // batch 0's read is held at the gate
  source->open_gate();
  EXPECT_TRUE(two_in_flight) << "batch 1's read did not start while batch 0's was in flight";
  ASSERT_EQ(batches.wait_for(kHang), std::future_status::ready);
  const auto ahead = batches.get();
  c.io_depth = 0;
  EXPECT_EQ(ahead, run_loader(std::make_shared<ImageFolderReader>(root), c));
  EXPECT_EQ(ahead.size(), 6u);
}

TEST(ReadAhead, LoaderGivesTheSameBatchesWithAndWithoutReadAhead) {
  const TempDir tmp("read_ahead_same");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 3, 8);
  // A corrupt file: its replacement must be the same too.
  std::ofstream(root / "c1" / "4.jpg", std::ios::trunc) << "not a jpeg";
  auto source = std::make_shared<ImageFolderReader>(root);
  for (int workers : {0, 2}) {
    std::ostringstream quiet;
    LoaderConfig c = same_batches_config(workers, quiet);
    const auto serial = expect_same_batches(source, c, IoEngine::Threads);
    // With the item cache too.
    c.cache = parse_cache_size("50%");
    c.io_depth = 0;
    const auto cached_serial = run_loader(source, c);
    c.io_depth = 4;
    EXPECT_EQ(run_loader(source, c), cached_serial);
    EXPECT_EQ(cached_serial, serial);
  }
}

TEST(ReadAhead, LoaderReportsReadsAndFailsUnderStrictAsSerial) {
  const TempDir tmp("read_ahead_strict");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 2, 6);
  std::ofstream(root / "c0" / "2.jpg", std::ios::trunc) << "not a jpeg";
  auto source = std::make_shared<ImageFolderReader>(root);
  fs::remove(root / "c1" / "3.jpg");  // unreadable after the scan
  std::string serial_error;
  for (int depth : {0, 4}) {
    LoaderConfig c;
    c.batch_size = 4;
    c.workers = 2;
    c.transform.image_size = 16;
    c.max_epochs = 1;
    c.io_depth = depth;
    c.shuffle = false;
    std::ostringstream warnings;
    c.warnings = &warnings;
    {
      Loader loader(source, c);
      while (loader.next()) {
      }
      EXPECT_EQ(loader.stats().corrupt(), 2) << depth;
      EXPECT_NE(warnings.str().find("3.jpg: cannot open"), std::string::npos) << warnings.str();
      const nlohmann::json j = loader.to_json();
      EXPECT_EQ(j["io_depth"], depth);
      if (depth > 0) {
        // The default engine: io_uring where it can serve (an image folder), else threads.
        const bool uring = io_uring_usable();
        EXPECT_EQ(j["read_ahead"]["engine"], uring ? "io_uring" : "threads");
        EXPECT_EQ(j["read_ahead"]["io_threads"], uring ? 0 : depth);
        EXPECT_EQ(j["read_ahead"]["window_per_worker"], 2);
        // The missing file goes to an I/O thread; the others, in the page cache, may be read inline.
        EXPECT_EQ(j["read_ahead"]["reads"].get<int>() + j["read_ahead"]["inline_reads"].get<int>(), 12);
        EXPECT_GE(j["read_ahead"]["reads"].get<int>(), 1);
        EXPECT_LE(j["read_ahead"]["max_outstanding"].get<int>(), depth);
        if (!uring) {  // an I/O thread times its failed read; on a ring the open failed before a read
          EXPECT_GT(j["read_ahead"]["read_busy_s"].get<double>(), 0.0);
          EXPECT_GT(loader.stats().io_reads(), 0);
          // Its wait for the thread is timed too (a ring's reads have none: null there).
          EXPECT_GE(j["read_ahead"]["queue_wait_ms"].get<double>(), 0.0) << j["read_ahead"];
        } else {
          EXPECT_TRUE(j["read_ahead"]["queue_wait_ms"].is_null()) << j["read_ahead"];
        }
      } else {
        EXPECT_TRUE(j["read_ahead"].is_null());
      }
    }
    c.strict = true;
    Loader strict(source, c);
    try {
      while (strict.next()) {
      }
      FAIL() << "expected a DataError at io depth " << depth;
    } catch (const DataError& e) {
      // The same first bad sample, the same message, with or without read-ahead.
      if (depth == 0) serial_error = e.what();
      EXPECT_EQ(e.what(), serial_error);
    }
  }
}

// A source slow enough that reads are in flight whenever the loader stops.
class SlowSource : public RecordingSource {
 public:
  using RecordingSource::RecordingSource;
  void fetch(std::size_t i, Bytes& out) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    RecordingSource::fetch(i, out);
    fetched_.fetch_add(1);
  }
  long fetched() const { return fetched_.load(); }

 private:
  mutable std::atomic<long> fetched_{0};
};

TEST(ReadAhead, LoaderStopMidEpochEndsWithoutHangOrLeftoverReads) {
  auto source = std::make_shared<SlowSource>(400);
  LoaderConfig c;
  c.batch_size = 16;
  c.workers = 2;
  c.io_depth = 6;
  c.max_epochs = 0;  // endless: only the stop ends it
  c.prep = [](const Bytes&, std::size_t) {};
  auto done = std::async(std::launch::async, [&] {
    auto loader = std::make_unique<Loader>(source, c);
    EXPECT_TRUE(loader->next().has_value());
    loader->stop();  // as on Ctrl-C: workers are mid-batch, reads in flight
    loader.reset();
  });
  ASSERT_EQ(done.wait_for(kHang), std::future_status::ready) << "the loader's stop hung";
  done.get();
  // No thread is left reading once the loader is gone.
  const long after = source->fetched();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(source->fetched(), after);
}

// --- The io_uring engine (--io-engine io_uring): each worker's reads on a ring of its own.

namespace {

// Skips the test, saying why, where io_uring cannot be set up (a build without liburing, a
// kernel or container that forbids it): the threads engine then serves, tested above.
#define SKIP_WITHOUT_IO_URING()                                                        \
  do {                                                                                 \
    std::string why;                                                                   \
    if (!io_uring_usable(&why)) GTEST_SKIP() << why << ": the io_uring engine is not tested"; \
  } while (false)

}  // namespace

TEST(ReadAheadIoUring, ReadsAnImageFolderAsItsFetchDoes) {
  SKIP_WITHOUT_IO_URING();
  const TempDir tmp("uring_folder");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 2, 5);
  auto reader = std::make_shared<ImageFolderReader>(root);
  reader->set_drop_after_read(true);  // no page-cache hit read inline: every read goes to the ring
  const std::size_t n = reader->size();
  std::vector<Bytes> expect(n);
  for (std::size_t i = 0; i < n; ++i) reader->fetch(i, expect[i]);
  // After the scan: one file removed, one grown (its scan size is now short), one shrunk.
  fs::remove(reader->path(3));
  std::ofstream(reader->path(5), std::ios::app | std::ios::binary) << std::string(70000, 'x');
  read_file(reader->path(5), expect[5]);
  fs::resize_file(reader->path(7), 100);
  read_file(reader->path(7), expect[7]);
  PipelineStats stats;
  ReadAhead ra(reader, nullptr, 4, true, &stats, nullptr, IoEngine::IoUring);
  EXPECT_EQ(ra.engine(), IoEngine::IoUring);
  EXPECT_EQ(ra.io_threads(), 0);
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
  ReadStream stream(ra, order, 4, 0);
  for (std::size_t i : order) {
    if (i == 3) {
      try {
        stream.take();
        FAIL() << "expected the removed file's DataError";
      } catch (const DataError& e) {
        EXPECT_NE(std::string(e.what()).find("cannot open " + reader->path(3).string()), std::string::npos) << e.what();
      }
      continue;
    }
    const FetchedItem item = stream.take();
    EXPECT_FALSE(item.from_cache);
    EXPECT_EQ(*item.data, expect[i]) << reader->path(i);
  }
  EXPECT_EQ(ra.reads_issued(), static_cast<std::int64_t>(n));
  EXPECT_EQ(ra.inline_reads(), 0);
  EXPECT_LE(ra.max_outstanding(), 4);
  EXPECT_EQ(stats.io_reads(), static_cast<std::int64_t>(n) - 1);  // the removed file failed at its open
}

TEST(ReadAheadIoUring, ASourceThatIsNoFolderOfFilesIsReadOnThreads) {
  // Asked for io_uring, a source without files (here in memory; stallsim's emulated storage)
  // is read ahead on I/O threads, whatever the machine.
  auto source = std::make_shared<RecordingSource>(6);
  ReadAhead ra(source, nullptr, 3, false, nullptr, nullptr, IoEngine::IoUring);
  EXPECT_EQ(ra.engine(), IoEngine::Threads);
  EXPECT_EQ(ra.io_threads(), 3);
  ReadStream stream(ra, {0, 1, 2, 3, 4, 5}, 2, 0);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(text(stream.take()), "item " + std::to_string(k));
  EXPECT_EQ(parse_io_engine("io_uring"), IoEngine::IoUring);
  EXPECT_EQ(parse_io_engine("threads"), IoEngine::Threads);
  EXPECT_EQ(parse_io_engine("auto"), IoEngine::Auto);
  EXPECT_THROW(parse_io_engine("aio"), std::invalid_argument);
}

TEST(ReadAheadIoUring, LoaderGivesTheSameBatchesAsTheSerialLoader) {
  SKIP_WITHOUT_IO_URING();
  const TempDir tmp("uring_same");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 3, 8);
  std::ofstream(root / "c1" / "4.jpg", std::ios::trunc) << "not a jpeg";
  auto source = std::make_shared<ImageFolderReader>(root);
  source->set_drop_after_read(true);  // every read through the ring
  for (int workers : {0, 2}) {
    std::ostringstream quiet;
    LoaderConfig c = same_batches_config(workers, quiet);
    expect_same_batches(source, c, IoEngine::IoUring);
    c.io_depth = 4;
    Loader loader(source, c);
    while (loader.next()) {
    }
    const nlohmann::json j = loader.to_json();
    EXPECT_EQ(j["read_ahead"]["engine"], "io_uring");
    EXPECT_EQ(j["read_ahead"]["io_threads"], 0);
    EXPECT_GE(j["read_ahead"]["reads"].get<int>(), 40);  // every sample of 2 epochs through the ring
  }
}

TEST(ReadAheadIoUring, LoaderStopMidEpochEndsWithoutHang) {
  SKIP_WITHOUT_IO_URING();
  const TempDir tmp("uring_stop");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 2, 40);
  auto source = std::make_shared<ImageFolderReader>(root);
  source->set_drop_after_read(true);
  LoaderConfig c;
  c.batch_size = 8;
  c.workers = 2;
  c.io_depth = 8;
  c.io_engine = IoEngine::IoUring;
  c.max_epochs = 0;  // endless: only the stop ends it
  c.transform.image_size = 16;
  auto done = std::async(std::launch::async, [&] {
    auto loader = std::make_unique<Loader>(source, c);
    EXPECT_TRUE(loader->next().has_value());
    loader->stop();  // workers mid-batch, reads in flight on their rings (and withdrawn by this thread)
    loader.reset();
  });
  ASSERT_EQ(done.wait_for(kHang), std::future_status::ready) << "the loader's stop hung";
  done.get();
}
