#include "remote_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "readahead_model.h"

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

double latency_at(const RemoteRates& r, int depth, int depth_now) {
  const double L1 = r.probe_latency_s > 0 ? r.probe_latency_s : r.latency_s;
  if (depth_now <= 1 || depth < 1) return r.latency_s;
  // A request waits behind the others in flight at the stages they share one at a time (the
  // client's transfer thread, the server's and a proxy's): with D in flight the chance that one
  // is ahead grows as 1 - 1/D. L1 at D = 1, the runs' L at their depth.
  const auto busy = [](int d) { return 1.0 - 1.0 / d; };
  return L1 + (r.latency_s - L1) * busy(depth) / busy(depth_now);
}

RemoteLoader calibrate_remote_loader(const LoaderShape& shape, double G, double P, int samples) {
  if (!(G > 0) || !(P > 0)) throw std::invalid_argument("remote model: G and P must be positive");
  RemoteLoader l;
  l.shape = shape;
  l.G = G;
  l.samples = samples;
  const double batch_s = shape.batch_size / G;
  // Every sample in the item cache: no request, prep alone (and the consumer).
  const auto cached = [&](double prep_s) {
    SampleCosts c;
    c.prep_s = prep_s;
    c.batch_s = batch_s;
    return simulate_readahead(shape, 1, c, 1.0, 0, 0, 1, std::min(8000, samples));
  };
  double lo = 0, hi = shape.cpus / P;
  while (cached(hi) > P && hi < 1e3) hi *= 2;
  for (int i = 0; i < 24; ++i) {
    const double mid = 0.5 * (lo + hi);
    (cached(mid) >= P ? lo : hi) = mid;
  }
  l.prep_s = lo;
  return l;
}

namespace {

constexpr int kLoadSteps = 6;  // damped steps settling the speed and the latency under load

// Prep's utilisation of the prep CPUs at `speed` samples/s, at most 1.
double prep_utilisation(const RemoteWhatIf& w, double speed, double prep_s) {
  if (!w.loader || !(w.loader->shape.cpus > 0)) return 0;
  return std::clamp(speed * prep_s / w.loader->shape.cpus, 0.0, 1.0);
}

// The chance that a request's CPU-side step, waking, finds every prep CPU busy with prep: u^c, c
// the prep CPUs (each busy a share u of the time).
double all_busy(const RemoteWhatIf& w, double u) {
  return std::pow(std::clamp(u, 0.0, 1.0), w.loader ? std::max(1, w.loader->shape.cpus) : 1);
}

}  // namespace

double remote_speed(const RemoteWhatIf& w, const RemoteRates& rates, double P, int depth, double x, double* latency_s) {
  if (!rates.known() || depth < 1 || !(P > 0)) return 0;
  RemoteRates r = rates;
  r.latency_s = latency_at(rates, depth, w.depth_now);
  if (latency_s) *latency_s = r.latency_s;
  if (!w.loader) {
    // The closed form: prep slowed by the misses' requests' CPU over the prep CPUs.
    const double misses = std::clamp(1.0 - x, 0.0, 1.0);
    const double P_x = w.cpu.cpus > 0 ? 1.0 / (1.0 / P + misses * w.cpu.charged_s() / w.cpu.cpus) : P;
    return remote_speed(r, depth, P_x, x);
  }
  const RemoteLoader& l = *w.loader;
  SampleCosts c;
  c.storage_s = r.mean_bytes / r.bandwidth_Bps;
  c.request_cpu_s = w.cpu.charged_s();
  c.prep_s = l.prep_s * (w.P > 0 ? w.P / P : 1.0);
  c.batch_s = l.shape.batch_size / l.G;
  c.latency_s = r.latency_s;
  c.channels = depth;
  const int window = std::max(1, depth / std::max(1, l.shape.workers));
  const double hits = std::clamp(x, 0.0, 1.0);
  double speed = simulate_readahead(l.shape, window, c, hits, 0, 0, 1, l.samples);
  if (!(w.load_k_s > 0) || !(speed > 0)) return speed;
  // NOTE: a request's latency under prep's load. A request's CPU-side steps (the client's I/O
  // thread waking, nginx and the proxy on the same CPUs) wait for a CPU when prep holds them all,
  // so L grows with prep's utilisation u of the c prep CPUs: by load_k_s u^c (every CPU busy with
  // prep a share u^c of the time; the wait then about a bounded slice), calibrated from the
  // cached run's first epoch (every sample a request, prep beside them) against the fetch-alone
  // run (u = 0: its own requests' load is in its L). Bounded at load_k_s when prep saturates the
  // CPUs: processor sharing's 1 / (1 - u) made generated images' depth 8 at +2 ms 12% too slow,
  // the scheduler running a thread that wakes from I/O soon. Small at low u: at depths 1-2 the
  // requests' latency was within 0.1-0.3 ms of the probe's. On the runs of 2026-11-29
  // (docs/performance.md, "Datasets over HTTP") the loaded epoch read 3.35 ms a request against
  // the fetch-alone run's 2.50 (real photographs at +2 ms), and the depth-8 run, latency-bound
  // there, was 17-22% below the prediction with the fetch-alone run's L; with this term 2-4%.
  const double L_base = c.latency_s;
  for (int i = 0; i < kLoadSteps; ++i) {
    c.latency_s = L_base + w.load_k_s * all_busy(w, prep_utilisation(w, speed, c.prep_s));
    speed = 0.5 * speed + 0.5 * simulate_readahead(l.shape, window, c, hits, 0, 0, 1, l.samples);
  }
  if (latency_s) *latency_s = c.latency_s;
  return speed;
}

double remote_speed(const RemoteWhatIf& w, int depth, double x) {
  return remote_speed(w, w.rates, w.P, depth, x);
}

namespace {

constexpr int kMaxDepth = 256;
constexpr double kMinLoad = 0.3;  // prep's utilisation in the loaded epoch, at least, to tell the growth from noise

// The smallest power-of-two depth (and the depth now) whose speed reaches kPlateauShare of the best.
// The best is the curve's highest point: simulated, a window of several batches a worker can lose
// speed (a worker claims its next batches before the others claim theirs).
std::optional<int> recommend_depth(const RemoteWhatIf& w) {
  std::vector<std::pair<int, double>> curve;
  double best = 0;
  for (int d = 1; d <= kMaxDepth; d *= 2) {
    curve.emplace_back(d, remote_speed(w, d));
    best = std::max(best, curve.back().second);
  }
  if (!(best > 0)) return std::nullopt;
  for (const auto& [d, speed] : curve) {
    if (speed >= kPlateauShare * best) return d;
  }
  return kMaxDepth;
}

// Calls f(rates, P) at each corner of L (with L1), B and P's uncertainty, ±1 standard error each.
template <class F>
void at_corners(const RemoteWhatIf& w, F f) {
  for (double sl : {-1.0, 1.0}) {
    for (double sb : {-1.0, 1.0}) {
      for (double sp : {-1.0, 1.0}) {
        RemoteRates r = w.rates;
        r.latency_s *= 1 + sl * w.rates.u_latency;
        r.probe_latency_s *= 1 + sl * w.rates.u_probe_latency;
        r.bandwidth_Bps *= 1 + sb * w.rates.u_bandwidth;
        f(r, w.P * (1 + sp * w.u_P));
      }
    }
  }
}

// The lowest and highest speed at `depth`, cache share `x`: the prediction itself (the simulation
// need not be monotone in every input) and the speed at the corners of L, B and P's uncertainty
// (±1 standard error each) and of the request CPU's range (its low and high ends together; one
// charge where the range is a single value).
std::pair<double, double> prediction_range(const RemoteWhatIf& w, int depth, double x, double predicted) {
  RemoteWhatIf c = w;
  const auto& cpu = w.cpu;
  std::vector<std::pair<double, double>> charges = {{cpu.client_s, cpu.others_s}};
  if (cpu.client_lo_s != cpu.client_hi_s || cpu.others_lo_s != cpu.others_hi_s) {
    charges = {{cpu.client_lo_s, cpu.others_lo_s}, {cpu.client_hi_s, cpu.others_hi_s}};
  }
  double lo = predicted, hi = predicted;
  for (const auto& [client, others] : charges) {
    c.cpu.client_s = client;
    c.cpu.others_s = others;
    at_corners(w, [&](const RemoteRates& r, double P) {
      const double v = remote_speed(c, r, P, depth, x);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    });
  }
  return {lo, hi};
}

}  // namespace

void with_end_probe(RemoteRates& r, double end, double u_end) {
  if (!(end > 0) || !(r.probe_latency_s > 0)) return;
  r.probe_latency_start_s = r.probe_latency_s;
  r.probe_latency_end_s = end;
  const double mean = 0.5 * (r.probe_latency_start_s + end);
  const double drift = 0.5 * std::abs(end - r.probe_latency_start_s) / mean;
  r.u_probe_latency = std::max({r.u_probe_latency, u_end, drift});
  r.probe_latency_s = mean;
  if (r.latency_from == "probe") {
    r.latency_s = mean;
    r.u_latency = r.u_probe_latency;
  }
}

RemoteRates with_loader_latency(RemoteRates r, int depth_now, double S, double u_S) {
  if (r.probe_latency_s <= 0) r.probe_latency_s = r.latency_s;
  if (!r.known() || depth_now < 1 || !(S > 0) || S >= 0.9 * r.bandwidth_Bps / r.mean_bytes) return r;
  r.latency_s = depth_now / S;
  r.u_latency = u_S;
  r.latency_from = "fetch-cold";
  return r;
}

RemoteWhatIf remote_whatif(const RemoteRates& rates, double P, double u_P, int depth_now,
                           const std::vector<DepthPoint>& measured, const RequestCpu& cpu,
                           std::optional<RemoteLoader> loader, const LoadedLatency& loaded) {
  RemoteWhatIf w;
  w.rates = rates;
  w.cpu = cpu;
  w.loader = std::move(loader);
  w.P = P;
  w.u_P = u_P;
  w.depth_now = std::max(1, depth_now);
  w.loaded = loaded;
  // The latency's growth with prep's load, from the loaded epoch against the fetch-alone run (L
  // is that run's, at the same depth): k = (L_loaded - L) / u_loaded^c, where prep loaded the CPUs
  // enough in that epoch to tell the growth from noise.
  if (w.loader && loaded.known() && loaded.depth == w.depth_now && rates.latency_from != "probe" && rates.known()) {
    w.u_loaded = prep_utilisation(w, loaded.rate, w.loader->prep_s);
    const double grown = rates.latency_s * (loaded.ratio - 1);
    if (w.u_loaded >= kMinLoad && grown > 0) w.load_k_s = grown / all_busy(w, w.u_loaded);
  }
  for (int d = 1; d <= kMaxDepth; d *= 2) w.depths.push_back(d);
  if (std::find(w.depths.begin(), w.depths.end(), w.depth_now) == w.depths.end()) {
    w.depths.push_back(w.depth_now);
    std::sort(w.depths.begin(), w.depths.end());
  }
  for (DepthPoint p : measured) {
    if (!(p.measured > 0) || p.depth < 1) continue;
    double latency = 0;
    p.predicted = remote_speed(w, w.rates, w.P, p.depth, p.cache, &latency);
    p.model_read_ms = 1e3 * latency;
    std::tie(p.lo, p.hi) = prediction_range(w, p.depth, p.cache, p.predicted);
    w.max_error_pct = std::max(w.max_error_pct, std::abs(p.error_pct()));
    w.passed = w.passed && !p.off(kSelfCheckThresholdPct);
    w.checks.push_back(p);
  }
  w.depth_rec = recommend_depth(w);
  return w;
}

std::optional<Remedy> io_depth_remedy(const RemoteWhatIf& w) {
  if (!w.depth_rec || *w.depth_rec <= w.from_depth() || !w.rates.known()) return std::nullopt;
  const int d = *w.depth_rec;
  Remedy r;
  r.name = "io depth";
  r.stall = Bound::Fetch;
  r.from = remote_speed(w, w.from_depth());
  r.to = remote_speed(w, d);
  const double f = remote_fetch_rate(w.rates, d);
  const char* then = f >= w.P ? "then prep-bound" : "then the server's bandwidth bounds it";
  r.detail = fmt::format("raise --io-depth from {} to {} (requests in flight); {}", w.from_depth(), d, then);
  // The gain at the corners of L, B and P's uncertainty.
  double lo = 0, hi = 0;
  bool first = true;
  at_corners(w, [&](const RemoteRates& c, double P) {
    const double from = remote_speed(w, c, P, w.from_depth());
    const double g = from > 0 ? remote_speed(w, c, P, d) / from : 0;
    lo = first ? g : std::min(lo, g);
    hi = first ? g : std::max(hi, g);
    first = false;
  });
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

const char* remote_formula(const RemoteWhatIf& w) {
  return w.loader ? "simulated: the loader's workers and windows, D requests in flight each taking L(D), "
                    "B / size at most; each request's CPU on the prep CPUs; prep calibrated to P"
                  : "F(D, x) = min(D / L(D), B / (size (1 - x))); speed = min(P(x), F(D, x)), "
                    "P(x) = 1 / (1/P + (1 - x) r / c)";
}

nlohmann::json remote_whatif_json(const RemoteWhatIf& w) {
  const auto at_depth = [&](int d) {
    RemoteRates r = w.rates;
    r.latency_s = latency_at(w.rates, d, w.depth_now);
    return r;
  };
  nlohmann::json curve = nlohmann::json::array();
  for (int d : w.depths) {
    curve.push_back({{"io_depth", d}, {"fetch", remote_fetch_rate(at_depth(d), d)}, {"predicted", remote_speed(w, d)}});
  }
  nlohmann::json checks = nlohmann::json::array();
  for (const DepthPoint& p : w.checks) {
    checks.push_back({{"run", p.label},
                      {"io_depth", p.depth},
                      {"cache_fraction", p.cache},
                      {"measured", p.measured},
                      {"predicted", p.predicted},
                      {"range", p.hi > 0 ? nlohmann::json::array({p.lo, p.hi}) : nlohmann::json()},
                      {"measured_u", p.u_measured > 0 ? nlohmann::json(p.u_measured) : nlohmann::json()},
                      {"read_ms",
                       {{"measured", p.read_ms > 0 ? nlohmann::json(p.read_ms) : nlohmann::json()},
                        {"model", p.model_read_ms > 0 ? nlohmann::json(p.model_read_ms) : nlohmann::json()}}},
                      {"beside_read_ms", p.read_ms > 0 ? nlohmann::json(p.beside_ms) : nlohmann::json()},
                      {"error_pct", p.error_pct()},
                      {"off", p.off(kSelfCheckThresholdPct)}});
  }
  const RequestCpu& cpu = w.cpu;
  return {{"model", remote_formula(w)},
          {"simulated", w.loader.has_value()},
          {"request_cpu",
           {{"client_us", 1e6 * cpu.client_s},
            {"others_us", 1e6 * cpu.others_s},
            {"others_share", cpu.share},
            {"charged_us", 1e6 * cpu.charged_s()},
            {"client_from", cpu.client_from},
            {"others_from", cpu.others_from},
            {"prep_cpus", cpu.cpus},
            {"client_range_us", nlohmann::json::array({1e6 * cpu.client_lo_s, 1e6 * cpu.client_hi_s})},
            {"others_range_us", nlohmann::json::array({1e6 * cpu.others_lo_s, 1e6 * cpu.others_hi_s})},
            {"direct_us",
             [&] {
               nlohmann::json d = nlohmann::json::object();
               for (const auto& [label, s] : cpu.direct_s) d[label] = 1e6 * s;
               return d;
             }()},
            {"server_on_this_machine", cpu.server_here()}}},
          {"latency_under_load",
           {{"from", w.loaded.from},
            {"ratio", w.loaded.ratio},
            {"prep_utilisation", w.u_loaded},
            {"growth_ms", 1e3 * w.load_k_s}}},
          {"latency_ms", 1e3 * w.rates.latency_s},
          {"latency_u", w.rates.u_latency},
          {"latency_from", w.rates.latency_from},
          {"probe_latency_ms", 1e3 * (w.rates.probe_latency_s > 0 ? w.rates.probe_latency_s : w.rates.latency_s)},
          {"probe_latency_u", w.rates.u_probe_latency},
          {"probe_latency_start_ms",
           w.rates.probe_latency_end_s > 0 ? nlohmann::json(1e3 * w.rates.probe_latency_start_s) : nlohmann::json()},
          {"probe_latency_end_ms",
           w.rates.probe_latency_end_s > 0 ? nlohmann::json(1e3 * w.rates.probe_latency_end_s) : nlohmann::json()},
          {"bandwidth_MBps", w.rates.bandwidth_Bps / 1e6},
          {"bandwidth_u", w.rates.u_bandwidth},
          {"probe_depth", w.rates.probe_depth},
          {"mean_object_bytes", w.rates.mean_bytes},
          {"P", w.P},
          {"io_depth_now", w.from_depth()},
          {"latency_io_depth", w.depth_now},
          {"curve", curve},
          {"measured", checks},
          {"max_error_pct", w.checks.empty() ? nlohmann::json() : nlohmann::json(w.max_error_pct)},
          {"self_check_passed", w.passed},
          {"recommended_io_depth", w.depth_rec && w.passed ? nlohmann::json(*w.depth_rec) : nlohmann::json()}};
}

}  // namespace mlbench::stall
