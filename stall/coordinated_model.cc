#include "coordinated_model.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace mlbench::stall {

namespace {

// The smallest of the ceilings and its name.
std::pair<double, std::string> tightest(const std::vector<std::pair<double, std::string>>& limits) {
  std::pair<double, std::string> best{std::numeric_limits<double>::infinity(), ""};
  for (const auto& l : limits) {
    if (l.first < best.first) best = l;
  }
  return best;
}

double ratio(double budget, double cost) {
  return cost > 0 ? budget / cost : std::numeric_limits<double>::infinity();
}

}  // namespace

double device_per_job(const CoordinatedJobs& in) {
  if (in.shared_device_rate > 0) return in.shared_device_rate;
  if (in.devices > 0) return in.device_rate * std::min(1.0, in.devices / static_cast<double>(std::max(1, in.jobs)));
  return in.device_rate;
}

CoordinatedPrediction predict_coordinated(const CoordinatedJobs& in) {
  if (in.jobs < 1) throw std::invalid_argument("coordinated what-if: at least one job");
  if (!(in.cores > 0)) throw std::invalid_argument("coordinated what-if: cores must be > 0");
  if (in.prep_cpu_s < 0 || in.host_compute_cpu_s < 0 || in.step_cpu_extra_s < 0 || in.copy_cpu_s < 0 ||
      in.workers < 0 || !(in.device_rate > 0) || !(in.fetch_rate > 0)) {
    throw std::invalid_argument("coordinated what-if: a negative cost or a non-positive rate");
  }
  const double k = in.jobs, p = in.prep_cpu_s, h = in.host_compute_cpu_s + in.step_cpu_extra_s, c = in.copy_cpu_s;
  const double w = in.workers > 0 ? in.workers : std::numeric_limits<double>::infinity();
  if (in.devices < 0 || in.shared_device_rate < 0) {
    throw std::invalid_argument("coordinated what-if: a negative device count or rate");
  }
  const double device_share = device_per_job(in);
  auto solve = [&](double jobs_prepping, double fetchers, double copies, double prep_threads) {
    return tightest({{device_share, "device"},
                     {in.fetch_rate / fetchers, "fetch"},
                     {ratio(in.cores, jobs_prepping * p + k * (h + copies * c)), "cpu"},
                     {ratio(prep_threads, p), "workers"}});
  };
  CoordinatedPrediction r;
  // Alone: one job, the whole machine, no ring, no other job's step beside its own.
  {
    const auto a = tightest({{in.device_rate, "device"},
                             {in.fetch_rate, "fetch"},
                             {ratio(in.cores, p + in.host_compute_cpu_s), "cpu"},
                             {ratio(w, p), "workers"}});
    r.alone = a.first;
  }
  // Each of K jobs preps and fetches every sample: K x p CPU per group sample.
  const auto u = solve(k, k, 0.0, w);
  // Each sample prepped once (p), copied into the ring once and out K - 1
  // times (K copies over K jobs: one each), fetched once.
  const auto co = solve(1.0, 1.0, in.jobs > 1 ? 1.0 : 0.0, k * w);
  r.uncoordinated = u.first;
  r.coordinated = co.first;
  r.bound_uncoordinated = u.second;
  r.bound_coordinated = co.second;
  if (!std::isfinite(r.alone) || !std::isfinite(r.uncoordinated) || !std::isfinite(r.coordinated)) {
    throw std::invalid_argument("coordinated what-if: no cost and no ceiling (an unbounded speed)");
  }
  r.gain = r.coordinated / r.uncoordinated;
  return r;
}

CoordinatedJobs coordinated_inputs(int cores, double p1, double P, int prep_cpus, double G, bool device,
                                   double sample_bytes, double copy_bytes_per_s, int workers, int compute_cpus,
                                   double stage_prep_s, DeviceHost device_host) {
  CoordinatedJobs in;
  in.cores = std::max(1, cores);
  const double per_sample = p1 > 0 ? 1.0 / p1 : static_cast<double>(std::max(1, prep_cpus)) / P;
  in.prep_from = p1 > 0 ? "cpus-1" : "P";
  in.device_rate = G;
  const double threads = compute_cpus > 0 ? std::min<double>(compute_cpus, in.cores) : in.cores;
  in.host_compute_cpu_s =
      device ? std::min(per_sample, std::max(0.0, device_host.host_cpu_s)) : std::min(per_sample, threads / G);
  in.devices = device ? std::max(0, device_host.devices) : 0;
  in.prep_cpu_s = per_sample - in.host_compute_cpu_s;
  if (!device && stage_prep_s > 0 && stage_prep_s < in.prep_cpu_s) {
    in.host_compute_cpu_s = per_sample - stage_prep_s;
    in.prep_cpu_s = stage_prep_s;
    in.prep_from = "stages";
  }
  in.copy_cpu_s = copy_bytes_per_s > 0 ? sample_bytes / copy_bytes_per_s : 0.0;
  in.workers = workers;
  return in;
}

std::vector<int> shared_cpu_jobs(int cores, int compute_cpus, const std::vector<int>& jobs) {
  std::vector<int> fit;
  for (int k : jobs) {
    if (k >= 2 && compute_cpus > 0 && k * compute_cpus <= cores) fit.push_back(k);
  }
  return fit;
}

namespace {

// The K whose measured step CPU applies to `jobs` jobs: `jobs` itself, else the largest below it;
// 0 for none.
int step_cpu_from(int jobs, const std::map<int, double>& measured) {
  auto it = measured.upper_bound(jobs);
  if (it == measured.begin()) return 0;
  return std::prev(it)->first;
}

}  // namespace

CoordinatedJobs for_jobs(const CoordinatedJobs& base, int jobs, const JobsSharing& sharing) {
  CoordinatedJobs in = base;
  in.jobs = jobs;
  const auto measured = sharing.device_rate.find(jobs);
  if (measured != sharing.device_rate.end() && measured->second > 0) in.shared_device_rate = measured->second;
  if (const int from = step_cpu_from(jobs, sharing.step_cpu_extra_s); from > 0) {
    in.step_cpu_extra_s = std::max(0.0, sharing.step_cpu_extra_s.at(from));
  }
  return in;
}

nlohmann::json coordinated_whatif_json(const CoordinatedJobs& base, const std::vector<int>& jobs,
                                       const JobsSharing& sharing) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json predictions = nlohmann::json::array();
  for (int k : jobs) {
    const CoordinatedJobs in = for_jobs(base, k, sharing);
    const int step_from = step_cpu_from(k, sharing.step_cpu_extra_s);
    const CoordinatedPrediction p = predict_coordinated(in);
    const char* from = in.shared_device_rate > 0 ? "measured" : in.devices > 0 ? "G x D / K" : "G";
    predictions.push_back({{"jobs", k},
                           {"alone", p.alone},
                           {"uncoordinated", p.uncoordinated},
                           {"coordinated", p.coordinated},
                           {"gain", p.gain},
                           {"device_per_job", num(device_per_job(in))},
                           {"device_per_job_from", from},
                           {"step_cpu_extra_us", 1e6 * in.step_cpu_extra_s},
                           {"step_cpu_extra_from",
                            step_from > 0 ? nlohmann::json(fmt::format("synthetic-x{}", step_from)) : nlohmann::json()},
                           {"bound_uncoordinated", p.bound_uncoordinated},
                           {"bound_coordinated", p.bound_coordinated}});
  }
  return {{"model_formula", kCoordinatedFormula},
          {"cores", base.cores},
          {"prep_cpu_us", 1e6 * base.prep_cpu_s},
          {"prep_cpu_from", base.prep_from},
          {"host_compute_cpu_us", 1e6 * base.host_compute_cpu_s},
          {"copy_cpu_us", 1e6 * base.copy_cpu_s},
          {"G", num(base.device_rate)},
          {"devices", base.devices},
          {"workers", base.workers},
          {"data", "in the page cache (fetch CPU counted in prep)"},
          {"predictions", predictions},
          {"unit", "samples/s per job"}};
}

}  // namespace mlbench::stall
