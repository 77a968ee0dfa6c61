#include "remote_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace mlbench::stall {

double remote_fetch_rate(const RemoteRates& r, int depth, double x) {
  if (!r.known() || depth < 1) return 0;
  const double misses = std::clamp(1.0 - x, 0.0, 1.0);
  if (!(misses > 0)) return std::numeric_limits<double>::infinity();
  return std::min(r.bandwidth_Bps / (r.mean_bytes * misses), depth / r.latency_s);
}

double remote_speed(const RemoteRates& r, int depth, double P, double x) {
  const double f = remote_fetch_rate(r, depth, x);
  if (!(f > 0) || !(P > 0)) return 0;
  return std::min(P, f);
}

namespace {

constexpr int kMaxDepth = 256;

// The smallest power-of-two depth (and the depth now) whose speed reaches kPlateauShare of the best.
std::optional<int> recommend_depth(const RemoteRates& r, double P) {
  const double best = remote_speed(r, kMaxDepth, P);
  if (!(best > 0)) return std::nullopt;
  for (int d = 1; d <= kMaxDepth; d *= 2) {
    if (remote_speed(r, d, P) >= kPlateauShare * best) return d;
  }
  return kMaxDepth;
}

}  // namespace

RemoteRates with_loader_latency(RemoteRates r, int depth_now, double S, double u_S) {
  if (r.probe_latency_s <= 0) r.probe_latency_s = r.latency_s;
  if (!r.known() || depth_now < 1 || !(S > 0) || S >= 0.9 * r.bandwidth_Bps / r.mean_bytes) return r;
  r.latency_s = depth_now / S;
  r.u_latency = u_S;
  r.latency_from = "fetch-cold";
  return r;
}

RemoteWhatIf remote_whatif(const RemoteRates& rates, double P, double u_P, int depth_now,
                           const std::vector<DepthPoint>& measured) {
  RemoteWhatIf w;
  w.rates = rates;
  w.P = P;
  w.u_P = u_P;
  w.depth_now = std::max(1, depth_now);
  for (int d = 1; d <= kMaxDepth; d *= 2) w.depths.push_back(d);
  if (std::find(w.depths.begin(), w.depths.end(), w.depth_now) == w.depths.end()) {
    w.depths.push_back(w.depth_now);
    std::sort(w.depths.begin(), w.depths.end());
  }
  for (DepthPoint p : measured) {
    if (!(p.measured > 0) || p.depth < 1) continue;
    p.predicted = remote_speed(rates, p.depth, P, p.cache);
    w.max_error_pct = std::max(w.max_error_pct, std::abs(p.error_pct()));
    w.checks.push_back(p);
  }
  w.passed = w.max_error_pct <= kSelfCheckThresholdPct;
  w.depth_rec = recommend_depth(rates, P);
  return w;
}

std::optional<Remedy> io_depth_remedy(const RemoteWhatIf& w) {
  if (!w.depth_rec || *w.depth_rec <= w.depth_now || !w.rates.known()) return std::nullopt;
  const int d = *w.depth_rec;
  Remedy r;
  r.name = "io depth";
  r.stall = Bound::Fetch;
  r.from = remote_speed(w.rates, w.depth_now, w.P);
  r.to = remote_speed(w.rates, d, w.P);
  const double f = remote_fetch_rate(w.rates, d);
  const char* then = f >= w.P ? "then prep-bound" : "then the server's bandwidth bounds it";
  r.detail = fmt::format("raise --io-depth from {} to {} (requests in flight); {}", w.depth_now, d, then);
  // The gain at the corners of L, B and P's uncertainty.
  double lo = 0, hi = 0;
  bool first = true;
  for (double sl : {-1.0, 1.0}) {
    for (double sb : {-1.0, 1.0}) {
      for (double sp : {-1.0, 1.0}) {
        RemoteRates c = w.rates;
        c.latency_s *= 1 + sl * w.rates.u_latency;
        c.bandwidth_Bps *= 1 + sb * w.rates.u_bandwidth;
        const double P = w.P * (1 + sp * w.u_P);
        const double from = remote_speed(c, w.depth_now, P);
        const double g = from > 0 ? remote_speed(c, d, P) / from : 0;
        lo = first ? g : std::min(lo, g);
        hi = first ? g : std::max(hi, g);
        first = false;
      }
    }
  }
  r.gain_lo = lo;
  r.gain_hi = hi;
  // Its own model, checked against the io-depth runs (not the cache what-if's self-check).
  r.basis = "own model";
  std::string moving;
  for (const auto& [name, u] : {std::pair{"L", w.rates.u_latency}, {"B", w.rates.u_bandwidth}, {"P", w.u_P}}) {
    if (u > 0) moving += (moving.empty() ? "" : ", ") + std::string(name);
  }
  r.range_from = moving.empty() ? "" : moving + " at ±1 standard error";
  return r;
}

nlohmann::json remote_whatif_json(const RemoteWhatIf& w) {
  nlohmann::json curve = nlohmann::json::array();
  for (int d : w.depths) {
    curve.push_back(
        {{"io_depth", d}, {"fetch", remote_fetch_rate(w.rates, d)}, {"predicted", remote_speed(w.rates, d, w.P)}});
  }
  nlohmann::json checks = nlohmann::json::array();
  for (const DepthPoint& p : w.checks) {
    checks.push_back({{"run", p.label},
                      {"io_depth", p.depth},
                      {"cache_fraction", p.cache},
                      {"measured", p.measured},
                      {"predicted", p.predicted},
                      {"error_pct", p.error_pct()}});
  }
  return {{"model", "F(D, x) = min(D / L, B / (size (1 - x))); speed = min(P, F(D, x))"},
          {"latency_ms", 1e3 * w.rates.latency_s},
          {"latency_u", w.rates.u_latency},
          {"latency_from", w.rates.latency_from},
          {"probe_latency_ms", 1e3 * (w.rates.probe_latency_s > 0 ? w.rates.probe_latency_s : w.rates.latency_s)},
          {"bandwidth_MBps", w.rates.bandwidth_Bps / 1e6},
          {"bandwidth_u", w.rates.u_bandwidth},
          {"probe_depth", w.rates.probe_depth},
          {"mean_object_bytes", w.rates.mean_bytes},
          {"P", w.P},
          {"io_depth_now", w.depth_now},
          {"curve", curve},
          {"measured", checks},
          {"max_error_pct", w.checks.empty() ? nlohmann::json() : nlohmann::json(w.max_error_pct)},
          {"self_check_passed", w.passed},
          {"recommended_io_depth", w.depth_rec && w.passed ? nlohmann::json(*w.depth_rec) : nlohmann::json()}};
}

}  // namespace mlbench::stall
