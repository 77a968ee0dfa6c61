#include "partitioned_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace mlbench::stall {

namespace {

std::pair<double, std::string> tightest(double G, double P, double F) {
  if (G <= P && G <= F) return {G, "device"};
  if (P <= F) return {P, "prep"};
  return {F, "fetch"};
}

// 1 / (sum of share / rate), shares with a rate of infinity costing nothing.
double fetch_rate(std::initializer_list<std::pair<double, double>> share_rate) {
  double t = 0;
  for (const auto& [share, rate] : share_rate) {
    if (share > 0 && std::isfinite(rate)) t += share / rate;
  }
  return t > 0 ? 1.0 / t : std::numeric_limits<double>::infinity();
}

}  // namespace

double peer_requests_per_sample(int nodes, double batch_items, int max_ids_per_request) {
  if (nodes < 1 || !(batch_items >= 1) || max_ids_per_request < 1) {
    throw std::invalid_argument("partitioned what-if: at least one node, one item a batch and one id a request");
  }
  if (nodes == 1) return 0.0;
  const double n = nodes, b = batch_items;
  // One peer's requests for a batch: one where the batch has any of its items, more where it has
  // more than a request carries.
  const double per_peer = std::max(1.0 - std::pow(1.0 - 1.0 / n, b), b / (n * max_ids_per_request));
  return (n - 1) * per_peer / b;
}

PartitionedPrediction predict_partitioned(const PartitionedNodes& in) {
  if (in.nodes < 1) throw std::invalid_argument("partitioned what-if: at least one node");
  if (!(in.memory_fraction >= 0 && in.memory_fraction <= 1)) {
    throw std::invalid_argument("partitioned what-if: the memory fraction must be in [0, 1]");
  }
  for (double r : {in.prep_rate, in.device_rate, in.memory_rate, in.storage_rate, in.peer_rate}) {
    if (!(r > 0)) throw std::invalid_argument("partitioned what-if: rates must be > 0");
  }
  const double n = in.nodes, m = in.memory_fraction;
  if (in.cores < 0 || in.prep_cpu_s < 0 || in.peer_request_cpu_s < 0) {
    throw std::invalid_argument("partitioned what-if: negative CPUs or CPU costs");
  }
  // A node's prep ceiling: its own P, and its share of the CPUs over the CPU a sample costs.
  const auto prep = [&](double requests) {
    if (!(in.cores > 0) || !(in.prep_cpu_s > 0)) return in.prep_rate;
    const double budget = in.shared_cpus ? in.cores / n : in.cores;
    return std::min(in.prep_rate, budget / (in.prep_cpu_s + requests * in.peer_request_cpu_s));
  };
  PartitionedPrediction r;
  r.cluster_cached = std::min(1.0, n * m);
  r.local = std::min(m, 1.0 / n);
  r.peer = (n - 1) / n * r.cluster_cached;
  r.storage = 1.0 - r.cluster_cached;
  // Every item of another partition goes to its owner, cached there or not.
  r.requests = peer_requests_per_sample(in.nodes, in.batch_items, in.max_ids_per_request);
  // The N nodes' storage reads share S: per node, one read costs N / S of it.
  const double S_node = in.storage_rate / n;
  const auto own = tightest(in.device_rate, prep(0.0), fetch_rate({{m, in.memory_rate}, {1 - m, S_node}}));
  const auto part = tightest(in.device_rate, prep(r.requests),
                             fetch_rate({{r.local, in.memory_rate}, {r.peer, in.peer_rate}, {r.storage, S_node}}));
  if (!std::isfinite(own.first) || !std::isfinite(part.first)) {
    throw std::invalid_argument("partitioned what-if: no cost and no ceiling (an unbounded speed)");
  }
  r.own = own.first;
  r.partitioned = part.first;
  r.bound_own = own.second;
  r.bound_partitioned = part.second;
  r.gain = r.partitioned / r.own;
  return r;
}

PartitionedNodes partitioned_at(const PartitionedNodes& base, int nodes) {
  PartitionedNodes in = base;
  in.nodes = nodes;
  if (base.memory_fraction <= 0) in.memory_fraction = 1.0 / nodes;  // each node holds its partition
  return in;
}

nlohmann::json partitioned_whatif_json(const PartitionedNodes& base, const std::vector<int>& nodes) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json predictions = nlohmann::json::array();
  for (int n : nodes) {
    const PartitionedNodes in = partitioned_at(base, n);
    const PartitionedPrediction p = predict_partitioned(in);
    predictions.push_back({{"nodes", n},
                           {"memory_fraction", in.memory_fraction},
                           {"cluster_cached", p.cluster_cached},
                           {"from_local", p.local},
                           {"from_peers", p.peer},
                           {"from_storage", p.storage},
                           {"peer_requests_per_sample", p.requests},
                           {"own", p.own},
                           {"partitioned", p.partitioned},
                           {"gain", p.gain},
                           {"bound_own", p.bound_own},
                           {"bound_partitioned", p.bound_partitioned}});
  }
  return {{"model_formula", kPartitionedFormula},
          {"memory_fraction", base.memory_fraction > 0 ? nlohmann::json(base.memory_fraction) : nlohmann::json("1/N")},
          {"P", num(base.prep_rate)},
          {"G", num(base.device_rate)},
          {"C", num(base.memory_rate)},
          {"S", num(base.storage_rate)},
          {"R", num(base.peer_rate)},
          {"shared_cpus", base.shared_cpus},
          {"cores", base.cores},
          {"prep_cpu_us", 1e6 * base.prep_cpu_s},
          {"peer_request_cpu_us", 1e6 * base.peer_request_cpu_s},
          {"batch_items", base.batch_items},
          {"max_ids_per_request", base.max_ids_per_request},
          {"storage", "shared by the nodes"},
          {"predictions", predictions},
          {"unit", "samples/s per node"}};
}

}  // namespace mlbench::stall
