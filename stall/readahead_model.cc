#include "readahead_model.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <queue>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <fmt/format.h>

namespace mlbench::stall {
namespace {

void require_positive(double v, const char* name) {
  if (!(v > 0) || !std::isfinite(v)) {
    throw std::invalid_argument(fmt::format("rate {} must be positive and finite, got {}", name, v));
  }
}

// Events: a worker takes its next item (it may wait for the read), a worker's prep ends, the
// consumer looks for the next batch. Ordered by time, then creation.
enum class Event { Take, Done, Consume, RequestCpu };

class Simulation {
 public:
  Simulation(const LoaderShape& s, int window, const SampleCosts& c, double x, double hit_cpu_s, double burst,
             std::uint64_t seed)
      : shape_(s),
        window_(std::max(1, window)),
        costs_(c),
        x_(x),
        hit_cpu_s_(hit_cpu_s),
        burst_(std::max(0.0, burst)),
        rng_(seed),
        cpu_free_(static_cast<std::size_t>(s.cpus), 0.0),
        channel_free_(static_cast<std::size_t>(std::max(0, c.channels)), 0.0),
        workers_(static_cast<std::size_t>(s.workers)) {}

  double run(int samples) {
    consumer_.emplace(shape_, samples, costs_.batch_s);
    for (int i = 0; i < shape_.workers; ++i) {
      if (claim(i)) refill(i, 0.0);
      push(0.0, Event::Take, i);
    }
    while (!events_.empty()) {
      const auto [t, order, kind, i] = events_.top();
      events_.pop();
      (void)order;
      switch (kind) {
        case Event::Take:
          take_item(i, t);
          break;
        case Event::Done:
          if (const double end = finish_item(i, t); end >= 0) return end;
          break;
        case Event::Consume:
          if (const double end = take_batch(t); end >= 0) return end;
          break;
        case Event::RequestCpu:
          request_cpu(t);
          break;
      }
    }
    throw std::logic_error("read-ahead model: the simulation ran out of events");
  }

 private:
  using Entry = std::tuple<double, long, Event, int>;
  struct Item {
    long batch;
    double ready;  // when its bytes are there
    bool hit;
  };
  struct Worker {
    std::deque<long> batches;  // claimed, in order; the front is the one being built
    std::deque<Item> issued;   // issued and not yet taken, in order
    long issued_of_last = 0;   // items issued of batches.back()
    int done_in_front = 0;     // items of batches.front() prepped
    bool waiting = false;      // no batch: waits for the consumer to take one
  };

  void push(double t, Event e, int i) { events_.emplace(t, order_++, e, i); }

  // Claims the next batch for worker i when fewer than `prefetch` are claimed and not taken.
  bool claim(int i) {
    if (next_batch_ >= consumer_->taken() + shape_.prefetch) return false;
    Worker& w = workers_[static_cast<std::size_t>(i)];
    w.batches.push_back(next_batch_++);
    w.issued_of_last = 0;
    return true;
  }

  // Keeps `window` reads issued ahead of worker i, into its next batch once this one's are all
  // issued (claiming it if it may).
  void refill(int i, double t) {
    Worker& w = workers_[static_cast<std::size_t>(i)];
    while (static_cast<int>(w.issued.size()) < window_) {
      if (w.batches.empty()) return;
      if (w.issued_of_last >= shape_.batch_size) {
        if (!claim(i)) return;
        continue;
      }
      const bool hit = uniform_(rng_) < x_;
      double ready = t + costs_.hit_s;
      if (!hit && costs_.channels > 0) {
        // The first free of `channels` requests in flight answers in latency_s, no sooner than
        // the bandwidth allows (storage_s apart).
        std::pop_heap(channel_free_.begin(), channel_free_.end(), std::greater<>());
        const double start = std::max(t, channel_free_.back());
        storage_free_ = std::max(start, storage_free_) + costs_.storage_s;
        ready = std::max(start + costs_.latency_s, storage_free_);
        channel_free_.back() = ready + costs_.request_cpu_s;
        std::push_heap(channel_free_.begin(), channel_free_.end(), std::greater<>());
        if (costs_.request_cpu_s > 0) {
          // Its answer's CPU takes a prep CPU when it arrives (prep then lacks it), but does not
          // queue behind prep's work: the scheduler runs a thread waking from I/O within about a
          // slice, and that wait is the latency's growth under load (stall/remote_model.cc). The
          // item is there with the answer; its slot is busy request_cpu_s after it.
          push(ready, Event::RequestCpu, -1);
        }
      } else if (!hit) {
        // S in aggregate; after an idle spell up to `burst` requests go ahead of the rate.
        storage_free_ = std::max(t - burst_ * costs_.storage_s, storage_free_) + costs_.storage_s;
        ready = std::max(t, storage_free_);
      }
      w.issued.push_back({w.batches.back(), ready, hit});
      ++w.issued_of_last;
    }
  }

  // Worker i takes its next item: waits for its read, refills its window, then preps it on the
  // first free CPU (a miss's read CPU on its path too).
  void take_item(int i, double t) {
    Worker& w = workers_[static_cast<std::size_t>(i)];
    if (w.batches.empty()) {
      if (!claim(i)) {
        w.waiting = true;
        return;
      }
      refill(i, t);
    }
    if (w.issued.empty()) refill(i, t);
    if (w.issued.empty()) {
      w.waiting = true;  // nothing it may read until the consumer takes a batch
      return;
    }
    Item item = w.issued.front();
    if (item.ready > t) {
      push(item.ready, Event::Take, i);
      return;
    }
    w.issued.pop_front();
    refill(i, t);
    auto cpu = std::min_element(cpu_free_.begin(), cpu_free_.end());
    *cpu = std::max(t, *cpu) + std::max(0.5 * costs_.prep_s, costs_.prep_s + (item.hit ? hit_cpu_s_ : costs_.miss_s));
    push(*cpu, Event::Done, i);
  }

  // A request's answer arrived: its CPU takes the first free CPU (its item does not wait for it).
  void request_cpu(double t) {
    auto cpu = std::min_element(cpu_free_.begin(), cpu_free_.end());
    *cpu = std::max(t, *cpu) + costs_.request_cpu_s;
  }

  double finish_item(int i, double t) {
    Worker& w = workers_[static_cast<std::size_t>(i)];
    if (++w.done_in_front < shape_.batch_size) {
      push(t, Event::Take, i);
      return -1;
    }
    consumer_->finished(w.batches.front());
    w.batches.pop_front();
    w.done_in_front = 0;
    push(t, Event::Take, i);
    return take_batch(t);
  }

  // The consumer takes the next batch in order when free and ready, then computes for batch_s.
  double take_batch(double t) {
    if (!consumer_->take(t)) return -1;
    if (consumer_->done()) return consumer_->speed();
    push(consumer_->free_at(), Event::Consume, -1);
    for (int i = 0; i < shape_.workers; ++i) {
      Worker& w = workers_[static_cast<std::size_t>(i)];
      if (w.waiting && claim(i)) {
        w.waiting = false;
        refill(i, t);
        push(t, Event::Take, i);
      } else if (!w.batches.empty() && w.issued.size() < static_cast<std::size_t>(window_)) {
        refill(i, t);  // room freed for an early claim
      }
    }
    return -1;
  }

  LoaderShape shape_;
  int window_;
  SampleCosts costs_;
  double x_;
  double hit_cpu_s_;
  double burst_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> events_;
  long order_ = 0;
  double storage_free_ = 0;
  std::vector<double> cpu_free_;
  std::vector<double> channel_free_;  // a min-heap: when each request in flight ends
  std::vector<Worker> workers_;
  long next_batch_ = 0;
  std::optional<InOrderConsumer> consumer_;
};

}  // namespace

double simulate_readahead(const LoaderShape& shape, int window, const SampleCosts& costs, double hit_fraction,
                          double hit_cpu_s, double burst, std::uint64_t seed, int samples) {
  if (shape.workers < 1 || shape.cpus < 1 || shape.batch_size < 1 || shape.prefetch < 1 || window < 1) {
    throw std::invalid_argument(
        fmt::format("read-ahead model: workers {}, cpus {}, batch size {}, prefetch {}, window {} must be >= 1",
                    shape.workers, shape.cpus, shape.batch_size, shape.prefetch, window));
  }
  if (!(hit_fraction >= 0.0 && hit_fraction <= 1.0)) {
    throw std::invalid_argument(fmt::format("cache fraction must be in [0, 1], got {}", hit_fraction));
  }
  return Simulation(shape, window, costs, hit_fraction, hit_cpu_s, burst, seed).run(samples);
}

ReadAheadModel calibrate_readahead(const LoaderShape& shape, int window, double G, double P, double S, double C,
                                   std::optional<double> prep_busy_s, const ReadCpu& read_cpu, int samples,
                                   double burst) {
  require_positive(G, "G");
  require_positive(P, "P");
  require_positive(S, "S");
  require_positive(C, "C");
  ReadAheadModel m;
  m.shape = shape;
  m.window = std::max(1, window);
  m.G = G;
  m.storage_s = 1.0 / S;
  m.page_hit_s = shape.workers / C;
  m.samples = samples;
  m.burst = burst;
  m.miss_s = read_cpu.storage_extra_s;
  m.item_saved_s = read_cpu.page_read_s;
  const double batch_s = shape.batch_size / G;
  const auto cached = [&](double prep_s) {
    return simulate_readahead(shape, m.window, {m.storage_s, 0, m.page_hit_s, prep_s, batch_s}, 1.0, 0, burst, 1,
                              std::min(8000, samples));
  };
  double lo = 0, hi = shape.cpus / P;
  while (cached(hi) > P && hi < 1e3) hi *= 2;
  for (int i = 0; i < 24; ++i) {
    const double mid = 0.5 * (lo + hi);
    (cached(mid) >= P ? lo : hi) = mid;
  }
  m.prep_s = lo;
  m.prep_hidden = P >= 0.95 * G;
  if (m.prep_hidden && prep_busy_s && *prep_busy_s >= 0) m.prep_s = std::min(m.prep_s, *prep_busy_s);
  return m;
}

double readahead_speed(const ReadAheadModel& m, double x, CacheKind cache) {
  const bool item = cache == CacheKind::Item;
  return simulate_readahead(
      m.shape, m.window,
      {m.storage_s, m.miss_s, item ? m.item_hit_s : m.page_hit_s, m.prep_s, m.shape.batch_size / m.G}, x,
      item ? -m.item_saved_s : 0.0, m.burst, 1, m.samples);
}

double readahead_speed_storage(const ReadAheadModel& m, double factor) {
  return simulate_readahead(m.shape, m.window,
                            {m.storage_s / factor, m.miss_s, m.page_hit_s, m.prep_s, m.shape.batch_size / m.G}, 0.0,
                            0.0, m.burst, 1, m.samples);
}

}  // namespace mlbench::stall
