// The serial what-if model: a loader whose workers each fetch a
// sample and then prep it, in turn (pipeline/loader.cc with --io-depth 0), as
// a small discrete-event simulation. With few workers, they can all wait on
// storage while a CPU idles, or all prep while storage idles: the speed is
// below min(F(x), P, G), which the overlap model predicts. Pure: rates in,
// rates out, deterministic for a seed.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "analysis.h"  // CacheKind

namespace mlbench::stall {

// The loader as run: `workers` threads, each building whole batches of
// `batch_size` samples; at most `prefetch` batches claimed and not yet taken
// by the consumer; prep on `cpus` CPUs.
struct LoaderShape {
  int workers = 1;
  int cpus = 1;
  int batch_size = 1;
  int prefetch = 2;
};

// Per-sample service times, seconds.
struct SampleCosts {
  double storage_s = 0;  // a miss: queued first come, first served on one storage device
  double miss_s = 0;     // a miss: then this long in its worker (syscalls, wake-up), off the device
  double hit_s = 0;      // a cache hit: time in its worker (no shared resource)
  double prep_s = 0;     // on the first free of `cpus` CPUs, first come, first served
  double batch_s = 0;    // the consumer's time per batch (compute), after it takes one
  // The read-ahead model only: storage that answers `channels` requests at once (an HTTP server's
  // requests in flight), each in `latency_s`, storage_s apart at most (its bandwidth). 0: one
  // device, first come, first served (storage_s each).
  double latency_s = 0;
  int channels = 0;
  // With channels: the CPU an answer takes when it arrives (the client's, a server's on this
  // machine), taken from the prep CPUs (the first free) and holding its request's slot that long
  // after the answer; the item is ready with the answer (its wait for a CPU is the latency's
  // growth under load, stall/remote_model.h), not after prep's work queued before it.
  double request_cpu_s = 0;
};

// The consumer both simulations share (this one and stall/readahead_model.h): it takes finished
// batches in order, computes batch_s on each, and times the batches after a warm-up of whole
// rounds of `workers` batches (workers that start together finish batches in bursts, and a
// window cut inside a burst would count a batch too many or too few).
class InOrderConsumer {
 public:
  InOrderConsumer(const LoaderShape& shape, int samples, double batch_s);
  void finished(long batch) { ready_.insert(batch); }
  // Takes the next batch at time t when free and that batch is finished; then busy until free_at().
  bool take(double t);
  bool done() const { return taken_ == warm_ + timed_; }
  double speed() const;  // samples/s over the timed batches, once done()
  long taken() const { return taken_; }
  double free_at() const { return free_at_; }

 private:
  long warm_ = 0, timed_ = 0;
  int batch_size_ = 1;
  double batch_s_ = 0;
  std::set<long> ready_;  // finished batches not yet taken
  long taken_ = 0;
  double warm_at_ = 0, free_at_ = 0, done_at_ = 0;
};

// Samples per second the consumer takes when a fraction `hit_fraction` of
// samples (drawn at random, seeded) is a hit, over `samples` samples after a
// warm-up of `prefetch` batches. The same seed draws the same uniforms at every
// fraction, so a larger fraction hits a superset: the curve is monotone up to
// the queueing itself.
double simulate_serial(const LoaderShape& shape, const SampleCosts& costs, double hit_fraction,
                       std::uint64_t seed = 1, int samples = 20000);

// The serial model calibrated on the analyzer's measured rates (samples/s),
// never on anything injected: G synthetic, P cached (every sample a page-cache
// read, then prep), S fetch-cold (every sample from storage), C fetch-cached
// (every sample a page-cache read, no prep), F_obs cold (every sample from
// storage, then prep).
struct SerialModel {
  LoaderShape shape;
  double G = 0;
  double storage_s = 0;     // 1 / S: storage serves one request at a time
  double miss_s = 0;        // solved so that the cold run simulates at F_obs (0 when it does without)
  double page_hit_s = 0;    // workers / C: a page-cache read (open + read) in its worker
  double item_hit_s = 0;    // an item-cache hit: a lookup in memory, not measured, taken as 0
  double prep_s = 0;        // solved so that the cached run simulates at P
  bool prep_hidden = false; // the cached run ran within 5% of G: compute hid prep's own time
};

// `prep_busy_s`: seconds per sample the cached run's stage timers saw in prep
// (decode + augment + collate), used as an upper bound on prep_s when that
// run ran at G (then P says only that prep is at least that fast); nullopt
// when not reported. Throws std::invalid_argument on a non-positive rate or shape.
// `F_obs`: the cold run; a worker's miss costs more than its turn on storage
// (the read's syscalls, the wake-up after it) when the cold run is slower than
// the simulation without that cost by more than 2% (the smallest such cost);
// fetch-cold's workers hid it by queueing.
// NaN: not calibrated (miss_s 0).
SerialModel calibrate_serial(const LoaderShape& shape, double G, double P, double S, double C,
                             std::optional<double> prep_busy_s = std::nullopt, double F_obs = std::nan(""));

// Predicted samples/s with fraction x of the dataset in the given cache.
double serial_speed(const SerialModel& m, double x, CacheKind cache);

// The same with storage `factor` times faster.
double serial_speed_storage(const SerialModel& m, double factor);

// Smallest x whose predicted speed is within 2% (run-to-run noise) of the
// best the cache can give, min(G, speed at x = 1); 0 when x = 0 already is.
double serial_recommended_cache(const SerialModel& m, CacheKind cache);

}  // namespace mlbench::stall
