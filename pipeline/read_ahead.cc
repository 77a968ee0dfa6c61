#include "pipeline/read_ahead.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "pipeline/fetch_origin.h"

namespace mlbench::pipeline {

namespace {
using Clock = std::chrono::steady_clock;
}

ReadAhead::ReadAhead(std::shared_ptr<const ItemSource> source, ItemCache* cache, int io_depth, bool timed,
                     PipelineStats* stats, TraceRecorder* trace)
    : source_(std::move(source)), cache_(cache), timed_(timed), stats_(stats),
      // Enough free buffers for every read in flight and the ones being decoded.
      buffers_(static_cast<std::size_t>(std::max(1, io_depth)) * 2 + 8) {
  if (io_depth < 1) throw std::invalid_argument("read-ahead needs an I/O depth of at least 1");
  for (int i = 0; i < io_depth; ++i) tracks_.push_back(trace ? &trace->add_track(fmt::format("io {}", i)) : nullptr);
  for (int i = 0; i < io_depth; ++i) threads_.emplace_back([this, i] { run(i); });
}

ReadAhead::~ReadAhead() { stop(); }

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
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++outstanding_;
    max_outstanding_ = std::max(max_outstanding_, outstanding_);
    if (read_here) ++inline_reads_;
    if (r->state == State::Done) return r;
    if (stopping_) {
      r->state = State::Dropped;
      return r;
    }
    ++reads_issued_;
    queue_.push_back(r);
  }
  work_cv_.notify_one();
  return r;
}

FetchedItem ReadAhead::take(const std::shared_ptr<Request>& r) {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return r->state == State::Done || r->state == State::Dropped; });
  --outstanding_;
  if (r->state == State::Dropped) throw ReadAheadStopped();
  if (r->error) std::rethrow_exception(r->error);
  return {r->data, r->from_cache};
}

void ReadAhead::withdraw(const std::shared_ptr<Request>& r) {
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
      if (stats_ && timed_) stats_->add_io_read(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      // A partitioned cache's fetch from a peer is its own span name (docs/pipeline.md, "Trace").
      const char* name = this_thread_fetch_origin() == FetchOrigin::kPeer ? "read peer" : "read";
      if (track) track->span(name, t0, t1, r->batch, static_cast<std::int64_t>(r->index));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      r->state = State::Done;
    }
    done_cv_.notify_all();
  }
}

ReadStream::ReadStream(ReadAhead& read_ahead, std::vector<std::size_t> items, std::size_t window, std::int64_t batch,
                       std::size_t initial)
    : read_ahead_(read_ahead), items_(std::move(items)), window_(std::max<std::size_t>(1, window)), batch_(batch) {
  issue_up_to(std::min(initial, window_));
}

ReadStream::~ReadStream() {
  for (std::size_t k = taken_; k < issued_.size(); ++k) read_ahead_.withdraw(issued_[k]);
}

void ReadStream::issue_up_to(std::size_t end) {
  end = std::min(end, items_.size());
  while (issued_.size() < end) issued_.push_back(read_ahead_.issue(items_[issued_.size()], batch_));
}

void ReadStream::issue_ahead(std::size_t count) { issue_up_to(taken_ + std::min(count, window_)); }

void ReadStream::set_overflow(std::function<void(std::size_t room)> overflow) {
  overflow_ = std::move(overflow);
  spill();
}

void ReadStream::refill() {
  issue_up_to(taken_ + window_);
  spill();
}

void ReadStream::spill() {
  const std::size_t outstanding = issued_.size() - taken_;
  if (!overflow_ || issued_.size() < items_.size() || outstanding >= window_) return;
  try {
    overflow_(window_ - outstanding);
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
