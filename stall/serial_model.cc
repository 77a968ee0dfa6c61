#include "serial_model.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <queue>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace mlbench::stall {
namespace {

void require_positive(double v, const char* name) {
  if (!(v > 0) || !std::isfinite(v)) {
    throw std::invalid_argument(fmt::format("rate {} must be positive and finite, got {}", name, v));
  }
}

// One event: a worker's fetch starts, its prep starts, its sample ends, or the
// consumer looks for the next batch. Ordered by time, then by creation, so
// equal times resolve the same way on every machine.
enum class Event { Fetch, Prep, Done, Consume };

class Simulation {
 public:
  Simulation(const LoaderShape& s, const SampleCosts& c, double x, std::uint64_t seed)
      : shape_(s), costs_(c), x_(x), rng_(seed), cpu_free_(static_cast<std::size_t>(s.cpus), 0.0),
        batch_of_(static_cast<std::size_t>(s.workers), -1), done_in_batch_(static_cast<std::size_t>(s.workers), 0) {}

  double run(int samples) {
    consumer_.emplace(shape_, samples, costs_.batch_s);
    for (int w = 0; w < shape_.workers; ++w) claim(w, 0.0);
    while (!events_.empty()) {
      const auto [t, order, kind, w] = events_.top();
      events_.pop();
      (void)order;
      switch (kind) {
        case Event::Fetch: {
          double end = t + costs_.hit_s;
          if (uniform_(rng_) >= x_) {
            storage_free_ = std::max(t, storage_free_) + costs_.storage_s;
            end = storage_free_ + costs_.miss_s;
          }
          push(end, Event::Prep, w);
          break;
        }
        case Event::Prep: {
          auto cpu = std::min_element(cpu_free_.begin(), cpu_free_.end());
          *cpu = std::max(t, *cpu) + costs_.prep_s;
          push(*cpu, Event::Done, w);
          break;
        }
        case Event::Done: {
          const auto i = static_cast<std::size_t>(w);
          if (++done_in_batch_[i] < shape_.batch_size) {
            push(t, Event::Fetch, w);
            break;
          }
          consumer_->finished(batch_of_[i]);
          claim(w, t);
          if (const double end = take(t); end >= 0) return end;
          break;
        }
        case Event::Consume:
          if (const double end = take(t); end >= 0) return end;
          break;
      }
    }
    throw std::logic_error("serial model: the simulation ran out of events");
  }

 private:
  using Entry = std::tuple<double, long, Event, int>;

  void push(double t, Event e, int w) { events_.emplace(t, order_++, e, w); }

  // The consumer takes the next batch in order when it is free and that batch
  // is ready, then computes for batch_s. Returns the speed once the timed
  // batches are taken, else -1.
  double take(double t) {
    if (!consumer_->take(t)) return -1;
    if (consumer_->done()) return consumer_->speed();
    push(consumer_->free_at(), Event::Consume, -1);
    while (!waiting_.empty() && next_batch_ < consumer_->taken() + shape_.prefetch) {
      const int v = waiting_.front();
      waiting_.pop_front();
      claim(v, t);
    }
    return -1;
  }

  // A worker claims the next batch when fewer than `prefetch` are claimed and
  // not yet taken (pipeline/queue.h); else it waits for the consumer.
  void claim(int w, double t) {
    if (next_batch_ < consumer_->taken() + shape_.prefetch) {
      batch_of_[static_cast<std::size_t>(w)] = next_batch_++;
      done_in_batch_[static_cast<std::size_t>(w)] = 0;
      push(t, Event::Fetch, w);
    } else {
      waiting_.push_back(w);
    }
  }

  LoaderShape shape_;
  SampleCosts costs_;
  double x_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> events_;
  long order_ = 0;
  double storage_free_ = 0;
  std::vector<double> cpu_free_;
  std::vector<long> batch_of_;
  std::vector<int> done_in_batch_;
  std::deque<int> waiting_;
  long next_batch_ = 0;
  std::optional<InOrderConsumer> consumer_;
};

}  // namespace

InOrderConsumer::InOrderConsumer(const LoaderShape& shape, int samples, double batch_s)
    : batch_size_(shape.batch_size), batch_s_(batch_s) {
  const long w = shape.workers;
  const auto rounds = [w](long batches) { return (batches + w - 1) / w * w; };
  warm_ = rounds(std::max(2, shape.prefetch));
  timed_ = rounds(std::max(20L, static_cast<long>((samples + shape.batch_size - 1) / shape.batch_size)));
}

bool InOrderConsumer::take(double t) {
  if (t < free_at_ || ready_.empty() || *ready_.begin() != taken_) return false;
  ready_.erase(ready_.begin());
  ++taken_;
  if (taken_ == warm_) warm_at_ = t;
  if (done()) done_at_ = t;
  free_at_ = t + batch_s_;
  return true;
}

double InOrderConsumer::speed() const {
  return static_cast<double>(timed_ * batch_size_) / (done_at_ - warm_at_);
}

namespace {

void check_shape(const LoaderShape& s) {
  if (s.workers < 1 || s.cpus < 1 || s.batch_size < 1 || s.prefetch < 1) {
    throw std::invalid_argument(fmt::format("serial model: workers {}, cpus {}, batch size {}, prefetch {} must be >= 1",
                                            s.workers, s.cpus, s.batch_size, s.prefetch));
  }
}

}  // namespace

double simulate_serial(const LoaderShape& shape, const SampleCosts& costs, double hit_fraction, std::uint64_t seed,
                       int samples) {
  check_shape(shape);
  if (!(hit_fraction >= 0.0 && hit_fraction <= 1.0)) {
    throw std::invalid_argument(fmt::format("cache fraction must be in [0, 1], got {}", hit_fraction));
  }
  return Simulation(shape, costs, hit_fraction, seed).run(samples);
}

SerialModel calibrate_serial(const LoaderShape& shape, double G, double P, double S, double C,
                             std::optional<double> prep_busy_s, double F_obs) {
  check_shape(shape);
  require_positive(G, "G");
  require_positive(P, "P");
  require_positive(S, "S");
  require_positive(C, "C");
  SerialModel m;
  m.shape = shape;
  m.G = G;
  m.storage_s = 1.0 / S;
  // The fetch-cached run: `workers` page-cache reads at a time, no prep.
  m.page_hit_s = shape.workers / C;
  // The cached run is every sample a page-cache hit, then prep: the prep time
  // that makes it simulate at P. The speed falls as prep_s grows: bisection.
  const auto cached = [&](double prep_s) {
    return simulate_serial(shape, {m.storage_s, 0, m.page_hit_s, prep_s, shape.batch_size / G}, 1.0, 1, 10000);
  };
  double lo = 0, hi = shape.cpus / P;
  while (cached(hi) > P && hi < 1e3) hi *= 2;
  for (int i = 0; i < 40; ++i) {
    const double mid = 0.5 * (lo + hi);
    (cached(mid) >= P ? lo : hi) = mid;
  }
  m.prep_s = lo;
  // Within 5% of G (the two runs' noise on a loaded machine) the cached run
  // was paced by compute: prep took at most prep_s, maybe much less; the
  // stage timers measured it directly.
  m.prep_hidden = P >= 0.95 * G;
  if (m.prep_hidden && prep_busy_s && *prep_busy_s >= 0) m.prep_s = std::min(m.prep_s, *prep_busy_s);
  if (std::isfinite(F_obs) && F_obs > 0) {
    const auto cold = [&](double miss_s) {
      return simulate_serial(shape, {m.storage_s, miss_s, 0, m.prep_s, shape.batch_size / G}, 0.0, 1, 10000);
    };
    // 2%: run-to-run noise. The smallest cost that slows the cold run to
    // F_obs: where storage alone sets the pace (the workers hide a cost per
    // miss up to a point), any cost below that point fits, and none is seen.
    if (cold(0) > 1.02 * F_obs) {
      double lo_m = 0, hi_m = shape.workers / F_obs;  // at that much per miss alone, W workers run at F_obs
      for (int i = 0; i < 40; ++i) {
        const double mid = 0.5 * (lo_m + hi_m);
        (cold(mid) > F_obs ? lo_m : hi_m) = mid;
      }
      m.miss_s = hi_m;
    }
  }
  return m;
}

double serial_speed(const SerialModel& m, double x, CacheKind cache) {
  const double hit = cache == CacheKind::Item ? m.item_hit_s : m.page_hit_s;
  return simulate_serial(m.shape, {m.storage_s, m.miss_s, hit, m.prep_s, m.shape.batch_size / m.G}, x);
}

double serial_speed_storage(const SerialModel& m, double factor) {
  return simulate_serial(m.shape, {m.storage_s / factor, m.miss_s, m.page_hit_s, m.prep_s, m.shape.batch_size / m.G},
                         0.0);
}

double serial_recommended_cache(const SerialModel& m, CacheKind cache) {
  const double target = 0.98 * std::min(m.G, serial_speed(m, 1.0, cache));
  if (serial_speed(m, 0.0, cache) >= target) return 0.0;
  double lo = 0.0, hi = 1.0;
  for (int i = 0; i < 12; ++i) {
    const double mid = 0.5 * (lo + hi);
    (serial_speed(m, mid, cache) >= target ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace mlbench::stall
