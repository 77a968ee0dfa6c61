// The cache what-if (see cache_whatif.h).
#include "cache_whatif.h"

#include <array>
#include <cmath>

namespace mlbench::stall {

// The overlap model's storage rate. The cold run read every item from
// storage at F_obs, so storage sustains at least that with the reads the
// pipeline keeps in flight; a fetch-only run that measured less kept fewer
// (behind a blkio throttle, each request's own latency then adds to the
// throttle's wait), and would put the what-if low. And when storage is the
// cold run's limit (S below P and G) and the two agree within twice their
// combined standard error (about 95%: noise, not two rates), both measure the
// same rate: pooled by their standard errors, steadier than either (docs/stall.md,
// "Analysis", "The overlap model's storage rate"). The serial model calibrates S itself.
double CacheWhatIf::storage_for_model(double st, double f, double p, double g) const {
  if (in_.serial) return st;
  const double var_s = std::pow(in_.u_S * st, 2), var_f = std::pow(in_.u_F * f, 2);
  const bool storage_bound = st < p && st < g;
  const bool agree = std::abs(st - f) <= 2 * std::sqrt(var_s + var_f);
  if (storage_bound && agree && var_s > 0 && var_f > 0) return (st / var_s + f / var_f) / (1 / var_s + 1 / var_f);
  return std::max(st, f);
}

CacheWhatIf::Model CacheWhatIf::build(double g, double p, double f, double st, double c, int samples) const {
  Model m{g, p, f, st, c, 0, 0, std::nullopt, std::nullopt};
  m.S_model = storage_for_model(st, f, p, g);
  // Fetch time the cold run's pipeline did not hide (workers that fetch and prep in turn);
  // the what-if charges it to every cache miss. The cold run's prep ran at P(0): every read
  // from storage.
  m.exposed = exposed_fetch_s(g, prep_rate(0.0, p, CacheKind::Page, in_.read_cpu), m.S_model, f);
  const MeasuredLoader& loader = in_.loader;
  if (in_.serial) m.sm = calibrate_serial(loader.shape, g, p, st, c, loader.prep_busy_s, f);
  if (in_.reads_ahead) {
    m.ra = calibrate_readahead(loader.shape, loader.window, g, p, m.S_model, c, loader.prep_busy_s, in_.read_cpu,
                               samples, in_.storage_burst);
  }
  return m;
}

CacheWhatIf::CacheWhatIf(const Measured& in) : in_(in), nominal_(build(in.G, in.P, in.F_obs, in.S, in.C, 20000)) {
  if (in.http) {
    http_corners_ = *in.http;
    if (http_corners_->loader) http_corners_->loader->samples = 5000;
  }
  // The corners: every rate at its measured value times (1 +- u). The serial model, a simulation
  // calibrated anew at each corner, takes the three rates it is calibrated on (P, S, F_obs).
  // Rates G, P, F_obs, S, C; only those with an uncertainty move.
  const std::array<double, 5> at{in.G, in.P, in.F_obs, in.S, in.C};
  const std::array<double, 5> rel{in.simulated ? 0.0 : in.u_G, in.u_P, in.u_F, in.u_S, in.simulated ? 0.0 : in.u_C};
  std::vector<std::size_t> axes;
  for (std::size_t i = 0; i < at.size(); ++i) {
    if (rel[i] > 0 && rel[i] < 1) axes.push_back(i);
  }
  for (unsigned mask = 0; !axes.empty() && mask < (1u << axes.size()); ++mask) {
    std::array<double, 5> v = at;
    for (std::size_t k = 0; k < axes.size(); ++k) v[axes[k]] *= 1 + ((mask >> k) & 1u ? rel[axes[k]] : -rel[axes[k]]);
    corners_.push_back(build(v[0], v[1], v[2], v[3], v[4], 5000));
  }
}

const RemoteWhatIf& CacheWhatIf::http_at(const Model& m) const {
  return &m == &nominal_ ? *in_.http : *http_corners_;
}

double CacheWhatIf::simulate_http(const RemoteWhatIf& w, const Model& m, double P, double x, double factor) const {
  // L as the loader's requests saw it at this corner's S (the fetch-alone run's rate).
  RemoteRates r = with_loader_latency(w.rates, w.depth_now, m.S, 0);
  r.latency_s /= factor;
  r.probe_latency_s /= factor;
  r.bandwidth_Bps *= factor;
  return std::min(m.G, remote_speed(w, r, P, w.from_depth(), x));
}

double CacheWhatIf::http_speed(const Model& m, double x, double factor) const {
  const auto key = std::make_tuple(&m, x, factor);
  if (const auto it = http_memo_.find(key); it != http_memo_.end()) return it->second;
  return http_memo_[key] = simulate_http(http_at(m), m, m.P, x, factor);
}

std::optional<double> CacheWhatIf::http_speed_with_twice_the_cpus(const Model& m) const {
  if (!in_.http) return std::nullopt;
  RemoteWhatIf w = http_at(m);
  if (w.loader) {
    w.loader->shape.workers *= 2;
    w.loader->shape.cpus *= 2;
    w.loader->shape.prefetch *= 2;  // the loader's default prefetch grows with its workers
  }
  w.cpu.cpus *= 2;  // the requests' CPU, too, spread over twice the CPUs
  w.P *= 2;         // the simulation's prep per sample stays (P / w.P), the closed form's P doubles
  return simulate_http(w, m, 2 * m.P, 0, 1);
}

double CacheWhatIf::predict_with(const Model& m, double x, CacheKind cache) const {
  // Over HTTP an item-cache hit and a page-cache hit alike spare a request (no page cache holds an
  // object fetched over HTTP; the curves are the same).
  if (in_.http) return http_speed(m, x);
  if (m.ra) return readahead_speed(*m.ra, x, cache);
  return m.sm ? serial_speed(*m.sm, x, cache)
              : predicted_speed(x, m.P, m.G, m.C, m.S_model, m.exposed, cache, in_.read_cpu);
}

double CacheWhatIf::storage_speed(const Model& m, double factor) const {
  if (in_.http) return http_speed(m, 0, factor);
  if (m.ra) return readahead_speed_storage(*m.ra, factor);
  return m.sm ? serial_speed_storage(*m.sm, factor)
              : predicted_speed(0.0, m.P, m.G, m.C, m.S_model * factor, m.exposed / factor, CacheKind::Item,
                                in_.read_cpu);
}

// At the knee a prediction rests on F and P at once and moves most with either; below it, on
// fetch alone (docs/stall.md, "Answers you can act on").
std::optional<double> CacheWhatIf::knee(CacheKind cache) const {
  if (nominal_.ra) return cache_for_share([&](double x) { return predict(x, cache); }, 0.98);
  return nominal_.sm ? std::optional<double>(serial_recommended_cache(*nominal_.sm, cache))
                     : recommended_cache(in_.P, in_.G, in_.C, nominal_.S_model, nominal_.exposed, cache, in_.read_cpu);
}

std::optional<double> CacheWhatIf::plateau_point(CacheKind cache, const std::optional<double>& knee) const {
  if (!knee) return std::nullopt;
  return cache_for_share([&](double x) { return predict(x, cache); }, kPlateauShare);
}

nlohmann::json CacheWhatIf::curve_json(CacheKind cache) const {
  nlohmann::json curve = nlohmann::json::array();
  for (int i = 0; i <= 20; ++i) {
    const double x = i / 20.0;
    const auto [lo, hi] = range_at(x, cache);
    if (cache == CacheKind::Item) {
      curve.push_back({{"x", x},
                       {"fetch", in_.http ? remote_fetch_rate(in_.http->rates, in_.http->from_depth(), x)
                                          : fetch_rate(x, in_.C, nominal_.S_model)},
                       {"predicted", predict(x, cache)},
                       {"lo", lo},
                       {"hi", hi}});
    } else {
      curve.push_back({{"x", x}, {"predicted", predict(x, cache)}, {"lo", lo}, {"hi", hi}});
    }
  }
  return curve;
}

}  // namespace mlbench::stall
