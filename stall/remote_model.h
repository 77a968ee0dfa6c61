// The fetch model of a dataset over HTTP (docs/stall.md, "Datasets over HTTP"): an object store
// answers one request in L seconds and serves at most B bytes/s however many are in flight, so
// D requests in flight fetch F(D) = min(B / size, D / L) samples/s. With a share x of the dataset
// in the item cache only misses cross the network, but read-ahead's window is D samples in the
// sampler's order, hits included: hits do not free request slots, so the latency bound stays D / L
// and only the bandwidth bound rises: F(D, x) = min(D / L, B / (size (1 - x))). The loader runs at
// T(D, x) = min(P, F(D, x)), P its speed with every sample cached (the cached run). The what-if
// over --io-depth, its check against runs it did not use, and the remedy it names. Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis.h"

namespace mlbench::stall {

// What the probe of the server measured.
struct RemoteRates {
  double latency_s = 0;      // seconds a request takes (L): the model's
  double u_latency = 0;      // its relative uncertainty
  double probe_latency_s = 0;          // one request at a time, as the probe measured it
  std::string latency_from = "probe";  // "probe", or the run L was taken from
  double bandwidth_Bps = 0;  // probe_depth requests at once: bytes/s (B)
  double u_bandwidth = 0;
  int probe_depth = 0;
  double mean_bytes = 0;  // the objects' mean size
  bool known() const { return latency_s > 0 && bandwidth_Bps > 0 && mean_bytes > 0; }
};

// F(D, x): samples/s with `depth` samples in read-ahead's window, a share `x` of them cache hits.
double remote_fetch_rate(const RemoteRates& r, int depth, double x = 0);
// T(D, x): the loader's speed at `depth`, cache share `x`, prep-bound speed `P`.
double remote_speed(const RemoteRates& r, int depth, double P, double x = 0);

// A run at some --io-depth held against the model.
struct DepthPoint {
  std::string label;
  int depth = 0;
  double measured = 0;
  double predicted = 0;
  double cache = 0;  // the run's item cache, a share of the dataset
  double error_pct() const { return predicted > 0 ? 100 * (measured - predicted) / predicted : 0; }
};

struct RemoteWhatIf {
  RemoteRates rates;
  double P = 0;  // the cached run's speed
  double u_P = 0;
  int depth_now = 0;               // the analysis's runs' requests in flight
  std::vector<int> depths;         // the curve's points
  std::vector<DepthPoint> checks;  // measured runs the model did not use (the cold run and --io-depths)
  double max_error_pct = 0;
  bool passed = true;            // every check within kSelfCheckThresholdPct (or none made)
  std::optional<int> depth_rec;  // the smallest depth reaching kPlateauShare of the best speed
};

// L as the loader's own requests see it: `depth_now` / S, S the fetch-alone run's rate at the
// runs' depth (its threads, connections and the server's load), when S is latency-bound (below
// 90% of B / size); else the probe's L. `u_S`: S's relative uncertainty.
RemoteRates with_loader_latency(RemoteRates rates, int depth_now, double S, double u_S);

// The what-if from the rates, the cached run's speed and the checks' measured rates.
RemoteWhatIf remote_whatif(const RemoteRates& rates, double P, double u_P, int depth_now,
                           const std::vector<DepthPoint>& measured);
// The io-depth remedy ("raise --io-depth from 8 to 32"), when the recommended depth is above the
// one the runs used; its gain range over the rates' uncertainty.
std::optional<Remedy> io_depth_remedy(const RemoteWhatIf& w);
// stall.json's whatif.http.
nlohmann::json remote_whatif_json(const RemoteWhatIf& w);

}  // namespace mlbench::stall
