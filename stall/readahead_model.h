// The read-ahead what-if model: a loader whose workers keep `window` reads issued ahead of the
// sample they decode, across their batches (pipeline/read_ahead.h, --io-depth > 0), simulated
// event by event. Where fetch and prep are close (the knee of the cache curve), min(F(x), P) is
// optimistic: misses fall on a batch at random, a worker waits on a run of them while another's
// CPU idles, and a window of a few reads cannot smooth that out (docs/stall.md, "Analysis",
// read-ahead). Pure: rates in, rates out, deterministic for a seed.
#pragma once

#include <cstdint>
#include <optional>

#include "analysis.h"      // CacheKind
#include "serial_model.h"  // LoaderShape, SampleCosts

namespace mlbench::stall {

// Samples per second the consumer takes with `window` reads ahead per worker when a fraction
// `hit_fraction` of samples (drawn at random, seeded) is a hit. A miss waits its turn on one
// storage device (storage_s each, first come first served) and then miss_s on its worker's path
// (the read's CPU); a hit costs hit_s on its worker's path; then prep_s on the first free of
// `cpus` CPUs. A worker starts its next batch's reads once its current batch's are all issued,
// if fewer than `prefetch` batches are claimed and not yet taken.
// `hit_cpu_s`: a hit's CPU beyond a page-cache read's, on its worker's path (an item-cache hit
// saves the read: negative). `burst`: requests storage serves ahead of its rate after an idle
// spell (its queue: a real device serves the requests in flight at once, S in aggregate; 0: one
// at a time, first come first served, as stallsim's emulated device).
double simulate_readahead(const LoaderShape& shape, int window, const SampleCosts& costs, double hit_fraction,
                          double hit_cpu_s = 0, double burst = 0, std::uint64_t seed = 1, int samples = 20000);

// The model calibrated on the analyzer's measured rates: storage 1/S (S: the rate storage
// sustained with the loader's reads in flight, at least the cold run's), a page-cache read
// workers / C, prep so that the cached run simulates at P (at most the stage timers' prep where
// compute paced that run); a miss's CPU beyond a page-cache read's and what an item-cache hit
// saves against one, from the runs' process CPU (ReadCpu; 0 where not measured).
struct ReadAheadModel {
  LoaderShape shape;
  int window = 1;
  double G = 0;
  double storage_s = 0;
  double miss_s = 0;
  double page_hit_s = 0;
  double item_hit_s = 0;    // an item-cache hit: a lookup in memory, taken as 0
  double item_saved_s = 0;  // CPU an item-cache hit saves against a page-cache read
  double prep_s = 0;
  bool prep_hidden = false;
  int samples = 20000;  // simulated per prediction (fewer: faster, noisier; a range's corners use fewer)
  double burst = 0;     // simulate_readahead's `burst`
};

ReadAheadModel calibrate_readahead(const LoaderShape& shape, int window, double G, double P, double S, double C,
                                   std::optional<double> prep_busy_s = std::nullopt, const ReadCpu& read_cpu = {},
                                   int samples = 20000, double burst = 0);

// Predicted samples/s with fraction x of the dataset in the given cache.
double readahead_speed(const ReadAheadModel& m, double x, CacheKind cache);
// The same with no cache and storage `factor` times faster.
double readahead_speed_storage(const ReadAheadModel& m, double factor);

}  // namespace mlbench::stall
