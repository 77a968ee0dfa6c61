// The cache what-if: the model of the loader measured (serial, read-ahead or overlap) at the
// measured rates and at every corner of their uncertainty, so that each prediction comes with its
// range (docs/stall.md, "Answers you can act on"), and the knee and plateau point of its curve.
// Over HTTP (Measured::http) the fetch is the io-depth what-if's: requests in flight, each taking L,
// B bytes/s at most, their CPU on the prep CPUs (stall/remote_model.h), at the cold run's depth;
// a storage device's model, S in aggregate, would have its hits multiply the fetch rate, where
// read-ahead's window still waits on each miss a latency (docs/stall.md, "Datasets over HTTP").
#pragma once

#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis.h"
#include "measured.h"
#include "readahead_model.h"
#include "serial_model.h"

namespace mlbench::stall {

class CacheWhatIf {
 public:
  // The model at one set of rates.
  struct Model {
    double G, P, F_obs, S, C, S_model = 0, exposed = 0;
    std::optional<SerialModel> sm;
    std::optional<ReadAheadModel> ra;
  };

  explicit CacheWhatIf(const Measured& in);

  const Model& nominal() const { return nominal_; }
  // Speed with fraction x of the dataset in `cache`, at the measured rates or at model `m`'s.
  double predict(double x, CacheKind cache) const { return predict_with(nominal_, x, cache); }
  double predict_with(const Model& m, double x, CacheKind cache) const;
  // Uncached, with storage `factor` times faster (faster storage also shortens the exposed fetch).
  double storage_speed(const Model& m, double factor) const;
  // Over HTTP: uncached, at model m's rates, with twice the prep CPUs, the loader's workers and its
  // prefetch (prep scaled linearly), at the cold run's depth; nullopt for a storage device.
  std::optional<double> http_speed_with_twice_the_cpus(const Model& m) const;
  // Whether any rate carries an uncertainty (there are corners): else every range is one value.
  bool ranged() const { return !corners_.empty(); }
  // The range of f(model) over the corners (the measured rates' own value included).
  template <class F>
  std::pair<double, double> range_of(const F& f) const {
    double lo = f(nominal_), hi = lo;
    for (const Model& m : corners_) {
      const double v = f(m);
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    return {lo, hi};
  }
  std::pair<double, double> range_at(double x, CacheKind cache) const {
    return range_of([&](const Model& m) { return predict_with(m, x, cache); });
  }
  // The knee (fetch meets prep) of the curve of `cache`; nullopt when prep or compute bounds it
  // at every size.
  std::optional<double> knee(CacheKind cache) const;
  // The smallest cache whose predicted speed reaches kPlateauShare of the plateau (given a knee).
  std::optional<double> plateau_point(CacheKind cache, const std::optional<double>& knee) const;
  // stall.json's whatif.curve (item cache, with the fetch rate) or whatif.page_cache.curve.
  nlohmann::json curve_json(CacheKind cache) const;

 private:
  Model build(double g, double p, double f, double st, double c, int samples) const;
  // Over HTTP: the speed with a share x cached at model m's S (L from it) and P, storage `factor`
  // times faster (the latency shorter, the bandwidth wider).
  double http_speed(const Model& m, double x, double factor = 1) const;
  // Over HTTP: the io-depth what-if at model m's corner (the nominal one, or the corners' fewer
  // samples), and the speed w simulates at m's S (L from it) and G, prep at P.
  const RemoteWhatIf& http_at(const Model& m) const;
  double simulate_http(const RemoteWhatIf& w, const Model& m, double P, double x, double factor) const;
  double storage_for_model(double st, double f, double p, double g) const;

  const Measured& in_;
  std::optional<RemoteWhatIf> http_corners_;  // over HTTP: the io-depth what-if simulating fewer samples
  // Over HTTP: each simulated speed by (model, x, factor); both caches' curves and the sizing ask
  // for the same points again.
  mutable std::map<std::tuple<const Model*, double, double>, double> http_memo_;
  Model nominal_;
  std::vector<Model> corners_;
};

}  // namespace mlbench::stall
