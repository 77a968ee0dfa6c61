#include "pipeline/read_ahead.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include <fmt/format.h>
#include <unistd.h>

#ifdef MLBENCH_HAVE_LIBURING
#include <liburing.h>
#endif

#include "core/process.h"
#include "pipeline/fetch_origin.h"

namespace mlbench::pipeline {

namespace {
#ifdef MLBENCH_HAVE_LIBURING
// Default flags. A read's completion (the copy into its buffer) runs as task work of the
// worker that submitted it; IORING_SETUP_COOP_TASKRUN would defer it to that worker's
// next system call instead of interrupting it, but then a worker asleep (waiting for a
// batch to build) would not run it, and a read withdrawn by another thread at the
// loader's end could wait for it forever, and it is no faster (docs/pipeline.md, "Read-ahead").
int init_ring(unsigned entries, io_uring* ring) { return io_uring_queue_init(entries, ring, 0); }
#endif
}  // namespace

const char* to_string(IoEngine e) {
  switch (e) {
    case IoEngine::Auto: return "auto";
    case IoEngine::Threads: return "threads";
    case IoEngine::IoUring: return "io_uring";
  }
  return "?";
}

IoEngine parse_io_engine(const std::string& name) {
  if (name == "auto") return IoEngine::Auto;
  if (name == "threads") return IoEngine::Threads;
  if (name == "io_uring") return IoEngine::IoUring;
  throw std::invalid_argument("unknown I/O engine '" + name + "' (auto, threads, io_uring)");
}

bool io_uring_usable(std::string* why) {
#ifdef MLBENCH_HAVE_LIBURING
  static const int rc = [] {
    io_uring ring{};
    const int r = init_ring(4, &ring);
    if (r == 0) io_uring_queue_exit(&ring);
    return r;
  }();
  if (rc == 0) return true;
  if (why) *why = fmt::format("io_uring cannot be set up here: {}", std::strerror(-rc));
  return false;
#else
  if (why) *why = "this build has no io_uring (liburing-dev was not found at configure time)";
  return false;
#endif
}

// One worker thread's ring: it submits its reads there, and reaps them when it takes the
// items (any thread may reap, under `mu`: the loader's end withdraws from another thread).
struct ReadAhead::Ring {
  std::mutex mu;
  std::thread::id owner;
  int number = 0;
  // --trace: one track per read in flight at once ("io_uring R.L"), so no two spans of a
  // track overlap; a lane is free again once its read is reaped. Written under `mu`.
  std::vector<TraceRecorder::Track*> lanes;
  std::vector<bool> lane_busy;
  std::uint64_t next_id = 1;
  std::vector<std::pair<std::uint64_t, std::shared_ptr<Request>>> inflight;  // submitted, not reaped
#ifdef MLBENCH_HAVE_LIBURING
  io_uring ring{};
  ~Ring() {
    // Every buffer a read may still write into stays alive until its completion is reaped.
    while (!inflight.empty()) {
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(&ring, &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) break;
      const std::uint64_t id = cqe->user_data;
      io_uring_cqe_seen(&ring, cqe);
      auto it = std::find_if(inflight.begin(), inflight.end(), [&](const auto& e) { return e.first == id; });
      if (it != inflight.end()) {
        ::close(it->second->file.fd);
        inflight.erase(it);
      }
    }
    io_uring_queue_exit(&ring);
  }
#endif
};

ReadAhead::ReadAhead(std::shared_ptr<const ItemSource> source, ItemCache* cache, int io_depth, bool timed,
                     PipelineStats* stats, TraceRecorder* trace, IoEngine engine,
                     std::optional<DepthControllerConfig> adaptive)
    : source_(std::move(source)), cache_(cache), timed_(timed), stats_(stats),
      // Enough free buffers for every read in flight (at the adaptive bound) and the ones being decoded.
      buffers_(static_cast<std::size_t>(std::max({1, io_depth, adaptive ? adaptive->bound : 0})) * 2 + 8),
      trace_(trace), io_depth_(io_depth) {
  if (io_depth < 1) throw std::invalid_argument("read-ahead needs an I/O depth of at least 1");
  if (engine != IoEngine::Threads) {
    std::string why = "the data source is not a folder of files";
    uring_ = source_->reads_files() && io_uring_usable(&why);
    if (!uring_ && engine == IoEngine::IoUring) {
      fmt::print(stderr, "warning: --io-engine io_uring: {}; reading ahead on {} I/O threads\n", why, io_depth);
    }
  }
  if (uring_) return;
  int threads = io_depth;
  if (adaptive) {
    adaptive->start = io_depth;
    adaptive->bound = std::max(adaptive->bound, io_depth);
    controller_.emplace(*adaptive);
    adaptive_ = true;
    started_ = Clock::now();
    // Idle threads cost nothing: every depth the controller may ask for has its threads from the start.
    threads = adaptive->bound;
  }
  for (int i = 0; i < threads; ++i) tracks_.push_back(trace ? &trace->add_track(fmt::format("io {}", i)) : nullptr);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { run(i); });
}

std::optional<DepthController> ReadAhead::depth_controller() const {
  std::lock_guard<std::mutex> lock(mu_);
  return controller_;
}

ReadAhead::~ReadAhead() {
  stop();
  std::lock_guard<std::mutex> lock(rings_mu_);
  rings_.clear();
}

void ReadAhead::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& r : queue_) r->state = State::Dropped;
    queue_.clear();
  }
  work_cv_.notify_all();
  done_cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::int64_t ReadAhead::reads_issued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reads_issued_;
}

std::int64_t ReadAhead::inline_reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return inline_reads_;
}

int ReadAhead::max_outstanding() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_outstanding_;
}

std::shared_ptr<ReadAhead::Request> ReadAhead::issue(std::size_t index, std::int64_t batch) {
  auto r = std::make_shared<Request>();
  r->index = index;
  r->batch = batch;
  // The cache first: a hit is served at once and issues no read.
  if (cache_) {
    if (auto hit = cache_->get(index)) {
      r->data = std::move(hit);
      r->from_cache = true;
      r->state = State::Done;
    }
  }
  // Then what the source has without waiting (the page cache): read here.
  bool read_here = false;
  if (r->state != State::Done) {
    std::shared_ptr<Bytes> bytes = buffers_.acquire();
    if (source_->fetch_if_cached(index, *bytes)) {
      if (cache_) cache_->put(index, bytes);
      r->data = std::move(bytes);
      r->state = State::Done;
      read_here = true;
    }
  }
  // io_uring: the read goes to this thread's ring (or fails at its open: Done with the error).
  const bool on_ring = r->state != State::Done && uring_;
  if (on_ring) submit(r);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++outstanding_;
    max_outstanding_ = std::max(max_outstanding_, outstanding_);
    if (read_here) ++inline_reads_;
    if (on_ring) ++reads_issued_;
    if (on_ring || r->state == State::Done) return r;
    if (stopping_) {
      r->state = State::Dropped;
      return r;
    }
    ++reads_issued_;
    if (timed_) r->queued = Clock::now();
    queue_.push_back(r);
  }
  work_cv_.notify_one();
  return r;
}

FetchedItem ReadAhead::take(const std::shared_ptr<Request>& r) {
  if (r->ring) {
    wait_on_ring(*r);
    std::lock_guard<std::mutex> lock(mu_);
    --outstanding_;
    if (r->error) std::rethrow_exception(r->error);
    return {r->data, r->from_cache};
  }
  std::unique_lock<std::mutex> lock(mu_);
  const bool waited = r->state != State::Done;
  done_cv_.wait(lock, [&] { return r->state == State::Done || r->state == State::Dropped; });
  --outstanding_;
  if (r->state == State::Dropped) throw ReadAheadStopped();
  // A read's item waited for its worker (busy with another), or its worker for the wake-up after
  // the read it waited on: the cycle beside the read (not for reads done at issue: no read_end).
  if (stats_ && timed_ && r->read_end != Clock::time_point{}) {
    stats_->add_io_take(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - r->read_end).count(),
                        waited);
  }
  if (r->error) std::rethrow_exception(r->error);
  return {r->data, r->from_cache};
}

void ReadAhead::withdraw(const std::shared_ptr<Request>& r) {
  if (r->ring) {
    wait_on_ring(*r);  // in the kernel: it writes into its buffer until reaped
    std::lock_guard<std::mutex> lock(mu_);
    --outstanding_;
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  --outstanding_;
  if (r->state == State::Queued) {
    r->state = State::Dropped;
    queue_.erase(std::find(queue_.begin(), queue_.end(), r));
    return;
  }
  // Under way: its thread still writes into the request; wait for the end.
  done_cv_.wait(lock, [&] { return r->state != State::Running; });
}

void ReadAhead::run(int thread) {
  TraceRecorder::Track* track = tracks_[static_cast<std::size_t>(thread)];
  const bool timed = timed_ || track;
  // The thread's own CPU in a read, where the source is not local files (a request's CPU over the
  // network, which mlbench-stall charges to prep): a thread-clock read is a system call (0.6 us
  // here), too dear beside a page-cache read of a file for a figure nothing reads there.
  const bool cpu_timed = timed_ && !source_->reads_files();
  while (true) {
    std::shared_ptr<Request> r;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing under way is left to this thread
      r = std::move(queue_.front());
      queue_.pop_front();
      r->state = State::Running;
    }
    const auto t0 = timed ? Clock::now() : Clock::time_point{};
    // Its wait for this thread: the thread's wake-up (a CPU for it) or its earlier read.
    if (stats_ && timed_ && r->queued != Clock::time_point{}) {
      stats_->add_io_queue_wait(std::chrono::duration_cast<std::chrono::nanoseconds>(t0 - r->queued).count());
    }
    const std::int64_t cpu0 = cpu_timed ? core::this_thread_cpu_ns() : 0;
    try {
      std::shared_ptr<Bytes> bytes = buffers_.acquire();
      this_thread_fetch_origin() = FetchOrigin::kUnknown;
      source_->fetch(r->index, *bytes);
      if (cache_) cache_->put(r->index, bytes);
      r->data = std::move(bytes);
    } catch (...) {
      r->error = std::current_exception();
    }
    if (timed) {
      const auto t1 = Clock::now();
      r->read_end = t1;
      if (stats_ && timed_) {
        stats_->add_io_read(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count(),
                            cpu_timed ? core::this_thread_cpu_ns() - cpu0 : 0);
      }
      // A partitioned cache's fetch from a peer is its own span name (docs/pipeline.md, "Trace").
      const char* name = this_thread_fetch_origin() == FetchOrigin::kPeer ? "read peer" : "read";
      if (track) track->span(name, t0, t1, r->batch, static_cast<std::int64_t>(r->index));
    }
    const auto done = adaptive_ ? Clock::now() : Clock::time_point{};
    {
      std::lock_guard<std::mutex> lock(mu_);
      r->state = State::Done;
      ++reads_done_;
      if (controller_) {
        const double now_s = std::chrono::duration<double>(done - started_).count();
        io_depth_.store(controller_->update(now_s, reads_done_), std::memory_order_relaxed);
      }
    }
    done_cv_.notify_all();
  }
}

ReadAhead::Ring* ReadAhead::this_thread_ring() {
#ifdef MLBENCH_HAVE_LIBURING
  const auto me = std::this_thread::get_id();
  std::lock_guard<std::mutex> lock(rings_mu_);
  for (auto& g : rings_) {
    if (g->owner == me) return g.get();
  }
  auto g = std::make_unique<Ring>();
  unsigned entries = 8;
  while (entries < static_cast<unsigned>(io_depth())) entries *= 2;
  if (init_ring(entries, &g->ring) != 0) return nullptr;
  g->owner = me;
  g->number = static_cast<int>(rings_.size());
  rings_.push_back(std::move(g));
  return rings_.back().get();
#else
  return nullptr;
#endif
}

void ReadAhead::submit(const std::shared_ptr<Request>& req) {
  Request& r = *req;
  r.submitted = timed_ || trace_ ? Clock::now() : Clock::time_point{};
  try {
    r.file = source_->open_file_read(r.index);
  } catch (...) {
    r.error = std::current_exception();
    r.state = State::Done;
    return;
  }
  r.buffer = buffers_.acquire();
  r.buffer->resize(r.file.expect + 1);
#ifdef MLBENCH_HAVE_LIBURING
  if (Ring* g = this_thread_ring()) {
    std::lock_guard<std::mutex> lock(g->mu);
    io_uring_sqe* sqe = io_uring_get_sqe(&g->ring);
    if (sqe) {
      const std::uint64_t id = g->next_id++;
      io_uring_prep_read(sqe, r.file.fd, r.buffer->data(), static_cast<unsigned>(r.buffer->size()), 0);
      io_uring_sqe_set_data64(sqe, id);
      int rc = io_uring_submit(&g->ring);
      while (rc == -EINTR) rc = io_uring_submit(&g->ring);
      if (rc >= 1) {
        g->inflight.emplace_back(id, req);
        r.ring = g;
        r.state = State::Running;
        if (trace_) {
          const auto free = std::find(g->lane_busy.begin(), g->lane_busy.end(), false);
          r.lane = static_cast<std::size_t>(free - g->lane_busy.begin());
          if (free == g->lane_busy.end()) {
            g->lanes.push_back(&trace_->add_track(fmt::format("io_uring {}.{}", g->number, g->lanes.size())));
            g->lane_busy.push_back(true);
          } else {
            *free = true;
          }
        }
        return;
      }
      // Refused (e.g. EAGAIN: no kernel memory): the entry stays queued and would go in with the
      // next submission, reading into a buffer this read no longer owns; it goes in as a no-op.
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data64(sqe, 0);
    }
  }
#endif
  // No ring (or it refused the read): the read is done here, as the serial loader would.
  try {
    source_->finish_file_read(r.index, r.file, *r.buffer, std::nullopt);
    if (cache_) cache_->put(r.index, r.buffer);
    r.data = std::move(r.buffer);
  } catch (...) {
    r.error = std::current_exception();
  }
  r.state = State::Done;
}

void ReadAhead::wait_on_ring(Request& r) {
#ifdef MLBENCH_HAVE_LIBURING
  Ring& g = *r.ring;
  std::lock_guard<std::mutex> lock(g.mu);
  while (r.state != State::Done) {
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe(&g.ring, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) throw std::system_error(-rc, std::generic_category(), "io_uring_wait_cqe");
    const std::uint64_t id = cqe->user_data;
    const long got = cqe->res;
    io_uring_cqe_seen(&g.ring, cqe);
    auto it = std::find_if(g.inflight.begin(), g.inflight.end(), [&](const auto& e) { return e.first == id; });
    if (it == g.inflight.end()) continue;
    std::shared_ptr<Request> done = std::move(it->second);
    g.inflight.erase(it);
    try {
      source_->finish_file_read(done->index, done->file, *done->buffer, got);
      if (cache_) cache_->put(done->index, done->buffer);
      done->data = std::move(done->buffer);
    } catch (...) {
      done->error = std::current_exception();
    }
    const auto now = timed_ || trace_ ? Clock::now() : Clock::time_point{};
    if (stats_ && timed_) {
      stats_->add_io_read(std::chrono::duration_cast<std::chrono::nanoseconds>(now - done->submitted).count());
    }
    if (trace_ && done->lane < g.lanes.size()) {
      g.lanes[done->lane]->span("read", done->submitted, now, done->batch, static_cast<std::int64_t>(done->index));
      g.lane_busy[done->lane] = false;
    }
    done->state = State::Done;
  }
#else
  (void)r;
#endif
}

ReadStream::ReadStream(ReadAhead& read_ahead, std::vector<std::size_t> items, std::size_t window, std::int64_t batch,
                       std::size_t initial)
    : ReadStream(read_ahead, std::move(items), [window] { return window; }, batch, initial) {}

ReadStream::ReadStream(ReadAhead& read_ahead, std::vector<std::size_t> items, std::function<std::size_t()> window,
                       std::int64_t batch, std::size_t initial)
    : read_ahead_(read_ahead), items_(std::move(items)), window_(std::move(window)), batch_(batch) {
  read_ahead_.source_->will_fetch(items_);  // a partitioned cache asks each peer for its items at once
  issue_up_to(std::min(initial, this->window()));
}

ReadStream::~ReadStream() {
  for (std::size_t k = taken_; k < issued_.size(); ++k) read_ahead_.withdraw(issued_[k]);
}

void ReadStream::issue_up_to(std::size_t end) {
  end = std::min(end, items_.size());
  while (issued_.size() < end) issued_.push_back(read_ahead_.issue(items_[issued_.size()], batch_));
}

void ReadStream::issue_ahead(std::size_t count) { issue_up_to(taken_ + std::min(count, window())); }

void ReadStream::set_overflow(std::function<void(std::size_t room)> overflow) {
  overflow_ = std::move(overflow);
  spill();
}

void ReadStream::refill() {
  issue_up_to(taken_ + window());
  spill();
}

void ReadStream::spill() {
  const std::size_t outstanding = issued_.size() - taken_;
  const std::size_t window = this->window();  // read once: an adaptive depth may change meanwhile
  if (!overflow_ || issued_.size() < items_.size() || outstanding >= window) return;
  try {
    overflow_(window - outstanding);
  } catch (...) {
    overflow_ = nullptr;  // only an early start: the next batch then reads for itself
  }
}

FetchedItem ReadStream::take() {
  if (taken_ >= items_.size()) throw std::logic_error("ReadStream: every item was taken");
  const std::size_t k = taken_++;
  // Keep `window` reads ahead: the next one is issued before this item is decoded
  // (or its error handled).
  try {
    FetchedItem item = read_ahead_.take(issued_[k]);
    issued_[k].reset();
    refill();
    return item;
  } catch (const ReadAheadStopped&) {
    throw;
  } catch (...) {
    issued_[k].reset();
    refill();
    throw;
  }
}

}  // namespace mlbench::pipeline
