// Read-ahead (--io-depth N, docs/pipeline.md): a small pool of I/O threads, or
// io_uring (--io-engine), reads items through the ItemSource ahead of the
// workers that decode them, so a worker's decode of one sample overlaps the
// reads of the next ones. Each
// worker reads its batch through a ReadStream: items are issued in the
// sampler's order, at most `window` of them issued and not yet taken; the item
// cache is consulted when a read is issued (a hit issues no read). A read's
// error travels to the worker that takes the item, which handles it as a
// serial read's. The I/O-thread pool serves every source, the emulated storage
// of benchmarks/stallsim included; the io_uring engine serves sources whose items
// are files (ItemSource::reads_files): each worker thread submits its reads to a
// ring of its own and reaps them when it takes the items, so no thread is woken
// per read. An item the source can
// serve without waiting (ItemSource::fetch_if_cached: in the page cache) is read
// by the worker when it is issued: a hand-off to a thread would cost more than it saves.
// Over HTTP without --io-depth the depth adapts (pipeline/depth_controller.h): the I/O threads
// for its bound are started up front, the depth in flight follows the controller, and the
// workers' windows follow the depth.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/buffer_pool.h"
#include "pipeline/depth_controller.h"
#include "pipeline/item_cache.h"
#include "pipeline/source.h"
#include "pipeline/stats.h"
#include "pipeline/trace.h"

namespace mlbench::pipeline {

// Thrown to a worker waiting for a read when the loader stops.
class ReadAheadStopped : public std::runtime_error {
 public:
  ReadAheadStopped() : std::runtime_error("the loader was stopped while reads were in flight") {}
};

// One item's bytes, as a worker takes them.
struct FetchedItem {
  std::shared_ptr<const Bytes> data;
  bool from_cache = false;  // served by the item cache (no read issued)
};

// How reads ahead are issued (--io-engine). Auto: io_uring where it can serve the
// source (built with liburing, a ring can be set up here, the source reads files),
// else threads.
enum class IoEngine { Auto, Threads, IoUring };
const char* to_string(IoEngine e);  // "auto", "threads", "io_uring"
IoEngine parse_io_engine(const std::string& name);  // throws std::invalid_argument
// Whether this build has io_uring and a ring can be set up on this machine (a kernel
// without it, or a seccomp filter that forbids it, says no); `why` says why not.
bool io_uring_usable(std::string* why = nullptr);

class ReadAhead {
 public:
  // `io_depth` (>= 1) reads in flight: as many I/O threads, or that many per ring.
  // `cache`: null for none. `timed`: read the clock (stats on, or a trace). `stats`,
  // `trace`: null for none. `engine`: IoUring where it cannot serve falls back to threads.
  // `adaptive`: the depth adapts from `io_depth` (its start) up to its bound, on as many I/O
  // threads (NOTE [Adaptive depth]); threads only (ignored where io_uring serves).
  ReadAhead(std::shared_ptr<const ItemSource> source, ItemCache* cache, int io_depth, bool timed, PipelineStats* stats,
            TraceRecorder* trace, IoEngine engine = IoEngine::Threads,
            std::optional<DepthControllerConfig> adaptive = std::nullopt);
  ~ReadAhead();
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // The reads to keep in flight now (adaptive: the controller's depth, settled or still measured).
  int io_depth() const { return io_depth_.load(std::memory_order_relaxed); }
  bool adaptive() const { return adaptive_; }
  // The controller as it stands (a copy); nullopt when the depth is fixed.
  std::optional<DepthController> depth_controller() const;
  // The engine as run: Threads or IoUring.
  IoEngine engine() const { return uring_ ? IoEngine::IoUring : IoEngine::Threads; }
  int io_threads() const { return static_cast<int>(threads_.size()); }
  // Drops the reads not started, lets those under way end, ends the threads;
  // a worker waiting for a dropped read gets ReadAheadStopped. Idempotent.
  void stop();

  // Reads handed to the I/O threads, and reads done in the worker when issued
  // (page-cache hits); item-cache hits are neither. The most ever issued and
  // not yet taken at once.
  std::int64_t reads_issued() const;
  std::int64_t inline_reads() const;
  int max_outstanding() const;

 private:
  friend class ReadStream;
  using Clock = std::chrono::steady_clock;
  enum class State { Queued, Running, Done, Dropped };
  struct Ring;
  struct Request {
    std::size_t index = 0;
    std::int64_t batch = -1;
    State state = State::Queued;  // on a ring: guarded by the ring's mutex, else by mu_
    std::shared_ptr<const Bytes> data;
    bool from_cache = false;
    std::exception_ptr error;
    // io_uring: the ring it was submitted to, its file and buffer, when it was submitted.
    Ring* ring = nullptr;
    std::size_t lane = 0;  // the ring's trace lane it is drawn on
    FileRead file;
    std::shared_ptr<Bytes> buffer;
    Clock::time_point submitted;
    // Threads engine, timed: when it was queued for an I/O thread, and when its read ended.
    Clock::time_point queued, read_end;
  };

  std::shared_ptr<Request> issue(std::size_t index, std::int64_t batch);
  // Blocks until `r` is read; rethrows its error (or ReadAheadStopped).
  FetchedItem take(const std::shared_ptr<Request>& r);
  // Withdraws `r` (issued, never to be taken): drops it when not started, else waits for its end.
  void withdraw(const std::shared_ptr<Request>& r);
  void run(int thread);
  // io_uring: this thread's ring (set up on its first read); null when none can be.
  Ring* this_thread_ring();
  // Opens r's file and submits its read to this thread's ring; r is then Running on
  // it, or Done with the error (or with the bytes, read here, when no ring can be had).
  void submit(const std::shared_ptr<Request>& r);
  // Reaps r's ring until r is Done.
  void wait_on_ring(Request& r);

  std::shared_ptr<const ItemSource> source_;
  ItemCache* cache_;
  bool timed_;
  PipelineStats* stats_;
  ReadBufferPool buffers_;
  std::vector<TraceRecorder::Track*> tracks_;
  TraceRecorder* trace_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  bool stopping_ = false;
  int outstanding_ = 0, max_outstanding_ = 0;
  std::int64_t reads_issued_ = 0, inline_reads_ = 0;
  std::int64_t reads_done_ = 0;  // reads the I/O threads finished (adaptive: the controller's count)
  std::vector<std::thread> threads_;
  std::atomic<int> io_depth_{0};
  bool adaptive_ = false;
  std::optional<DepthController> controller_;  // adaptive; guarded by mu_
  Clock::time_point started_;
  bool uring_ = false;
  std::mutex rings_mu_;
  std::vector<std::unique_ptr<Ring>> rings_;
};

// One worker's reads over one batch: items[0], items[1], ... taken in order,
// at most `window` issued and not yet taken (a window that follows an adaptive depth is read
// again at each take). The destructor withdraws what was
// issued and not taken (a batch that ended early, e.g. on an error).
//
// Across batches: once every item of this batch is issued, the window's room
// left (window minus the items issued and not yet taken) goes to `overflow`,
// after each take: the worker's next batch's stream is started (or grown) with
// it, so that a batch's first reads are under way before it begins.
class ReadStream {
 public:
  // Issues the first `initial` items (default: `window`).
  ReadStream(ReadAhead& read_ahead, std::vector<std::size_t> items, std::size_t window, std::int64_t batch,
             std::size_t initial = SIZE_MAX);
  // The window as `window()` says at each take (at least 1).
  ReadStream(ReadAhead& read_ahead, std::vector<std::size_t> items, std::function<std::size_t()> window,
             std::int64_t batch, std::size_t initial = SIZE_MAX);
  ~ReadStream();
  ReadStream(const ReadStream&) = delete;
  ReadStream& operator=(const ReadStream&) = delete;

  // The next item's bytes (the k-th call: items[k]); rethrows its read's error.
  FetchedItem take();
  std::size_t taken() const { return taken_; }
  std::size_t issued() const { return issued_.size(); }
  std::int64_t batch() const { return batch_; }
  // Issues items until `count` are issued and not taken (at most `window`).
  void issue_ahead(std::size_t count);
  // See the class comment: called with the room (>= 1), at once when there is some.
  void set_overflow(std::function<void(std::size_t room)> overflow);

 private:
  void issue_up_to(std::size_t end);
  void refill();
  void spill();
  std::size_t window() const { return std::max<std::size_t>(1, window_()); }

  ReadAhead& read_ahead_;
  std::vector<std::size_t> items_;
  std::function<std::size_t()> window_;
  std::int64_t batch_;
  std::vector<std::shared_ptr<ReadAhead::Request>> issued_;
  std::size_t taken_ = 0;
  std::function<void(std::size_t)> overflow_;
};

}  // namespace mlbench::pipeline
