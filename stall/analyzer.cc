#include "analyzer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/sysinfo.h"
#include "analysis.h"
#include "cache_whatif.h"
#include "coordinated_model.h"
#include "decision.h"
#include "epoch_start.h"
#include "measured.h"
#include "nodes.h"
#include "partitioned_model.h"
#include "job_whatif.h"
#include "ranks.h"
#include "readahead_model.h"
#include "serial_model.h"

namespace mlbench::stall {

namespace {

nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

// "P, G": the names of the rates whose uncertainty moves a range ("" when none does).
std::string moving_rates(const std::vector<std::pair<const char*, double>>& rates) {
  std::string out;
  for (const auto& [name, u] : rates) {
    if (u > 0 && u < 1) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out;
}

// Every corner of `rel` (each factor 1 +- rel[i], those with rel[i] in (0, 1)); one all-ones corner
// when none moves.
std::vector<std::vector<double>> corners_of(const std::vector<double>& rel) {
  std::vector<std::size_t> axes;
  for (std::size_t i = 0; i < rel.size(); ++i) {
    if (rel[i] > 0 && rel[i] < 1) axes.push_back(i);
  }
  std::vector<std::vector<double>> out;
  for (unsigned mask = 0; mask < (1u << axes.size()); ++mask) {
    std::vector<double> f(rel.size(), 1.0);
    for (std::size_t k = 0; k < axes.size(); ++k) f[axes[k]] = 1 + ((mask >> k) & 1u ? rel[axes[k]] : -rel[axes[k]]);
    out.push_back(std::move(f));
  }
  return out;
}

nlohmann::json residency_json(const Residency& r) {
  return {{"fraction", r.fraction()}, {"pages", r.pages}, {"resident_pages", r.resident_pages}, {"files", r.files}};
}

// The CPU of one request to a peer, both ends (the partitioned what-if's k): from the peer runs
// (plan_peer_runs) where both were made and the difference is positive, else the back-to-back
// loopback measurement. A request, not an item: with read-ahead a node asks each peer once a batch
// (partitioned_model.h), so the peer runs' extra CPU a sample is over the requests they made a sample.
struct PeerCpu {
  double used_s = 0;
  std::string source = "loopback";  // "nodes" or "loopback"
  std::optional<double> nodes_s;    // measured with the peer runs (may be <= 0: noise)
  int node_count = 0;
  std::optional<double> local_item_s, partitioned_item_s;  // the two runs' CPU per sample
  std::optional<double> requests_per_sample;               // the peer-N runs' requests to peers a sample
  double batch_items = 1;                                  // B for the model: a batch where requests were batched
  int max_ids_per_request = PartitionedNodes{}.max_ids_per_request;  // M: the peer runs' --peer-batch
  std::vector<double> pairs_s;        // k from each pair of peer runs (made in turn), in order
  std::vector<double> pairs_local_s;  // each pair's peer-local CPU per sample (its p), in order
  std::string note;
};

// Nodes [from, to) of a combined peer run: their requests to peers and the items they took from
// peers, each per sample they loaded (pipeline.partitioned_cache.peer, pipeline.epochs[].images);
// nullopt where a report lacks them.
struct PeerTraffic {
  double requests = 0, items = 0;
};
std::optional<PeerTraffic> peer_traffic_per_sample(const RunOutcome& r, std::size_t from, std::size_t to) {
  double requests = 0, items = 0, samples = 0;
  for (std::size_t i = from; i < to && i < r.nodes.size(); ++i) {
    const auto p = r.nodes[i].record().pipeline;
    if (!p || !p->partitioned_cache || !p->partitioned_cache->peer_requests || p->epoch_images.empty()) {
      return std::nullopt;
    }
    requests += *p->partitioned_cache->peer_requests;
    items += p->partitioned_cache->peer_items;
    for (double images : p->epoch_images) samples += images;
  }
  if (!(samples > 0) || !(requests > 0)) return std::nullopt;
  return PeerTraffic{requests / samples, items / samples};
}

PeerCpu peer_cpu_of(const std::map<std::string, RunOutcome>& runs, const RawRates& raw, int batch_size) {
  PeerCpu k;
  // The loopback measurement: back to back, `peer_ids_per_request` items a request.
  k.used_s = raw.peer_cpu_s * std::max(1, raw.peer_ids_per_request);
  k.batch_items = std::max(1, batch_size);  // read-ahead batches the requests (the loader's default)
  const auto local = runs.find("peer-local");
  const RunOutcome* part = nullptr;
  for (const auto& [label, r] : runs) {
    if (const RunSpec spec = spec_of(label, r); spec.kind == "peer" && spec.peers && !r.nodes.empty()) {
      part = &r;
      k.node_count = spec.nodes;
    }
  }
  if (local == runs.end() || !part) {
    k.note = raw.peer_runs_note;
    return k;
  }
  k.local_item_s = cpu_per_item_s(local->second);
  k.partitioned_item_s = cpu_per_item_s(*part);
  if (!k.local_item_s || !k.partitioned_item_s || k.node_count < 2) {
    k.note = "the peer runs' reports have no process CPU; k from the loopback measurement";
    return k;
  }
  if (const auto p = part->record().pipeline;
      p && p->partitioned_cache && p->partitioned_cache->max_ids_per_request >= 1) {
    k.max_ids_per_request = static_cast<int>(p->partitioned_cache->max_ids_per_request);
  }
  // Requests a sample as the peer runs made them; a run that asked once per item (no read-ahead,
  // or --peer-batch 1) tells the model B = 1. Reports without the counts: the model's own count.
  const auto n = static_cast<std::size_t>(k.node_count);
  const auto traffic = peer_traffic_per_sample(*part, 0, part->nodes.size());
  if (traffic && traffic->items > 0 && traffic->items / traffic->requests < 1.5) k.batch_items = 1;
  const auto requests_of = [&](const std::optional<PeerTraffic>& t) {
    return t ? t->requests : peer_requests_per_sample(k.node_count, k.batch_items, k.max_ids_per_request);
  };
  k.requests_per_sample = requests_of(traffic);
  k.nodes_s = (*k.partitioned_item_s - *k.local_item_s) / *k.requests_per_sample;
  // The pairs: the combined runs list every pair's nodes in turn.
  for (std::size_t from = 0; from + n <= part->nodes.size() && from + n <= local->second.nodes.size(); from += n) {
    const auto a = mean_cpu_per_item_s(local->second, from, from + n);
    const auto b = mean_cpu_per_item_s(*part, from, from + n);
    if (a && b) {
      k.pairs_s.push_back((*b - *a) / requests_of(peer_traffic_per_sample(*part, from, from + n)));
      k.pairs_local_s.push_back(*a);
    }
  }
  if (*k.nodes_s > 0) {
    k.used_s = *k.nodes_s;
    k.source = "nodes";
  } else {
    k.note = fmt::format(
        "the peer runs measured no CPU for peer fetches ({:+.1f} us a sample, within their noise); k from the "
        "loopback measurement",
        1e6 * (*k.partitioned_item_s - *k.local_item_s));
  }
  return k;
}

// stall.json's whatif.partitioned: the model's predictions and where its k came from.
nlohmann::json partitioned_json(const PartitionedNodes& nodes, const PeerCpu& k, const std::string& prep_cpu_from,
                                const std::string& prep_rate_from) {
  const std::vector<int> counts{2, 4, 8};
  nlohmann::json j = partitioned_whatif_json(nodes, counts);
  j["prep_cpu_from"] = prep_cpu_from;
  j["P_from"] = prep_rate_from;
  const auto us = [](const std::optional<double>& s) { return s ? nlohmann::json(1e6 * *s) : nlohmann::json(); };
  const auto us_each = [](const std::vector<double>& seconds) {
    nlohmann::json a = nlohmann::json::array();
    for (double s : seconds) a.push_back(1e6 * s);
    return a;
  };
  j["peer_cpu"] = {
      {"source", k.source},
      {"per", "request"},
      {"requests_per_sample", k.requests_per_sample ? nlohmann::json(*k.requests_per_sample) : nlohmann::json()},
      {"used_us", 1e6 * k.used_s},
      {"nodes_us", us(k.nodes_s)},
      {"pairs_us", us_each(k.pairs_s)},
      {"pairs_local_cpu_per_item_us", us_each(k.pairs_local_s)},
      {"nodes", k.node_count},
      {"local_cpu_per_item_us", us(k.local_item_s)},
      {"partitioned_cpu_per_item_us", us(k.partitioned_item_s)},
      {"note", k.note}};
  // What each pair of runs would predict alone, carried to each prediction: the pair's own k (a
  // negative one counts as 0) and, where p came from the peer-local runs, the pair's own p. The
  // pairs are made in turn over 20 s or so, so their spread is the host's drift over the analysis
  // as well as the noise of k: a prediction is no steadier than that.
  const bool by_pair_k = k.source == "nodes";
  const bool by_pair_p = prep_cpu_from == "peer-local";
  if ((by_pair_k || by_pair_p) && k.pairs_s.size() > 1) {
    for (std::size_t c = 0; c < counts.size(); ++c) {
      PartitionedNodes in = partitioned_at(nodes, counts[c]);
      nlohmann::json& pred = j["predictions"][c];
      nlohmann::json each = nlohmann::json::array();
      for (std::size_t i = 0; i < k.pairs_s.size(); ++i) {
        if (by_pair_k) in.peer_request_cpu_s = std::max(0.0, k.pairs_s[i]);
        if (by_pair_p) in.prep_cpu_s = k.pairs_local_s[i];
        each.push_back(predict_partitioned(in).partitioned);
      }
      const auto [lo, hi] = std::minmax_element(each.begin(), each.end());
      pred["partitioned_range"] = {*lo, *hi};
      pred["partitioned_pairs"] = std::move(each);
    }
  }
  return j;
}

std::string whatif_formula(bool serial, double exposed, bool read_cpu) {
  if (serial) {
    return "serial: a simulation of the workers, each fetching a sample (a hit in its worker, a miss queued on "
           "storage at S) and then prepping it (on the first free CPU), the consumer at G behind the prefetch queue";
  }
  const std::string p = read_cpu ? "P(x)" : "P";
  const std::string cpu = read_cpu ? "; P(x) = 1 / (1/P + ((1 - x) r - x h) / c): a storage read's CPU r beyond a "
                                     "page-cache read (h, saved by an item-cache hit; page cache: h = 0) taken from "
                                     "prep's c CPUs"
                                   : "";
  return (exposed > 0 ? "1 / (max(1/F(x), 1/" + p +
                            ", 1/G) + (1 - x) e): fetch overlaps prep and compute, "
                            "e = fetch time per miss the cold run did not hide"
                      : "min(F(x), " + p + ", G): fetch overlaps prep and compute") +
         cpu;
}

std::string readahead_formula(int window) {
  return fmt::format(
      "read-ahead: a simulation of the workers, each keeping {} read(s) issued ahead of the sample it "
      "preps, across its batches (a miss served by storage at S in aggregate, a hit at once), prep on the first "
      "free CPU, the consumer at G behind the prefetch queue",
      window);
}

nlohmann::json readahead_json(const ReadAheadModel& m, double F_obs) {
  const double cold = readahead_speed_storage(m, 1.0);
  return {{"window", m.window},
          {"storage_burst", m.burst},
          {"prep_us", 1e6 * m.prep_s},
          {"storage_us", 1e6 * m.storage_s},
          {"miss_us", 1e6 * m.miss_s},
          {"page_hit_us", 1e6 * m.page_hit_s},
          {"prep_hidden", m.prep_hidden},
          {"predicted_cold", cold},
          {"cold_error_pct", 100 * relative_error(cold, F_obs)}};
}

nlohmann::json serial_json(const SerialModel& m, double F_obs) {
  const double cold = serial_speed_storage(m, 1.0);
  return {{"prep_us", 1e6 * m.prep_s},
          {"storage_us", 1e6 * m.storage_s},
          {"miss_us", 1e6 * m.miss_s},
          {"page_hit_us", 1e6 * m.page_hit_s},
          {"item_hit_us", 1e6 * m.item_hit_s},
          {"prep_hidden", m.prep_hidden},
          {"predicted_cold", cold},
          {"cold_error_pct", 100 * relative_error(cold, F_obs)}};
}

// The recommendation's sizes: the knee and plateau point of each cache's curve, and the CPUs
// whose prep keeps up with the speed the item cache would give (the CPU advice).
struct Sizing {
  std::optional<double> knee, page_knee, cache_rec, page_cache_rec;
  std::map<int, double> p_for_advice;
  std::optional<int> cores_rec;
};

Sizing size_remedies(const AnalysisContext& ctx, const Measured& in, const CacheWhatIf& w) {
  Sizing z;
  // The recommendation: the smallest cache whose predicted speed reaches kPlateauShare of the
  // plateau, where the curve has a knee (docs/stall.md, "Answers you can act on").
  z.knee = w.knee(CacheKind::Item);
  z.page_knee = w.knee(CacheKind::Page);
  z.cache_rec = w.plateau_point(CacheKind::Item, z.knee);
  z.page_cache_rec = w.plateau_point(CacheKind::Page, z.page_knee);
  const double need_rate = std::min(fetch_rate(z.cache_rec.value_or(1.0), in.C, w.nominal().S_model), in.G);
  // At this machine's CPU count the sweep's run is the cached run's setting measured again; the
  // cache recommendation was made against P, so the CPU advice is too, or two measurements of one
  // setting that differ by their noise could say "more DRAM up to x" and "more CPUs beyond the
  // largest count" of the same balance point.
  z.p_for_advice = in.p_by_cores;
  z.p_for_advice[ctx.cores_now] = in.P;
  z.cores_rec = recommended_cores(z.p_for_advice, need_rate * 0.98);  // 2%: within run-to-run noise
  return z;
}

std::vector<std::string> analysis_warnings(const std::map<std::string, RunOutcome>& runs, const Measured& in) {
  double cache_full = std::numeric_limits<double>::quiet_NaN();
  if (auto it = runs.find("cache-1.00"); it != runs.end()) cache_full = it->second.rate;
  std::vector<std::string> warnings = consistency_warnings(in.P, in.F_obs, cache_full);
  if (in.G > 1.01 * in.synthetic->rate) {
    warnings.push_back(fmt::format(
        "the synthetic run ({:.1f} samples/s) was slower than the {} run ({:.1f}), which fed the same consumer: G "
        "is taken as {:.1f} (a slow moment of the host in the synthetic run)",
        in.synthetic->rate, in.G_from, in.G, in.G));
  }
  for (std::string& w : skipped_sample_warnings(runs)) warnings.push_back(std::move(w));
  return warnings;
}

// The what-if against the runs it did not use to build the model: each cache-X run (X of the
// dataset in the item cache) and page-X run (X resident in the page cache, held there with
// --hold-page-cache).
struct MeasuredPoints {
  nlohmann::json item = nlohmann::json::array(), page = nlohmann::json::array();
  std::vector<CheckPoint> check;
  double max_err = 0, sum_err = 0;
};

MeasuredPoints measured_points(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs,
                               const Measured& in, const CacheWhatIf& w) {
  MeasuredPoints pts;
  for (const auto& [label, r] : runs) {
    const RunSpec spec = spec_of(label, r);
    const bool item = spec.kind == "cache", page = spec.kind == "page";
    if (!item && !page) continue;
    const double x = spec.cache_frac;
    const CacheKind cache = item ? CacheKind::Item : CacheKind::Page;
    const double pred = w.predict(x, cache);
    const auto [lo, hi] = w.range_at(x, cache);
    const double err = 100 * relative_error(pred, r.rate);
    const nlohmann::json point = {{"x", x},   {"measured", r.rate}, {"predicted", pred},
                                  {"lo", lo}, {"hi", hi},           {"error_pct", err}};
    if (item) {
      pts.max_err = std::max(pts.max_err, err);
      pts.sum_err += err;
      pts.item.push_back(point);
    } else {
      pts.page.push_back(point);
    }
    CheckPoint c{x,
                 r.rate,
                 pred,
                 fetch_rate(x, in.C, w.nominal().S_model),
                 item ? item_cache_fraction(r, ctx.items) : -1.0,
                 item && r.after.pages ? r.after.fraction() : -1.0};
    c.lo = lo;
    c.hi = hi;
    c.cache = cache;
    pts.check.push_back(c);
  }
  return pts;
}

nlohmann::json self_check_json(const SelfCheck& check) {
  nlohmann::json points = nlohmann::json::array();
  for (const CheckPoint& p : check.points) {
    points.push_back(
        {{"x", p.x},
         {"cache", to_string(p.cache)},
         {"measured", p.measured},
         {"predicted", p.predicted},
         {"lo", p.lo},
         {"hi", p.hi},
         {"error_pct", p.error_pct()},
         {"off", p.off(check.threshold_pct)},
         {"item_cache_fraction", p.cached_fraction >= 0 ? nlohmann::json(p.cached_fraction) : nlohmann::json()},
         {"page_cache_fraction_after",
          p.page_cache_fraction >= 0 ? nlohmann::json(p.page_cache_fraction) : nlohmann::json()}});
  }
  return {{"passed", check.ran ? nlohmann::json(check.passed) : nlohmann::json()},
          {"max_error_pct", check.ran ? nlohmann::json(check.max_error_pct) : nlohmann::json()},
          {"threshold_pct", check.threshold_pct},
          {"points", points},
          {"cause", check.cause.empty() ? nlohmann::json() : nlohmann::json(check.cause)},
          {"text", check.text}};
}

nlohmann::json runs_json(const std::map<std::string, RunOutcome>& runs) {
  nlohmann::json run_json = nlohmann::json::object();
  const auto cpu_us = [](const RunOutcome& o) {
    const auto s = cpu_per_item_s(o);
    return s ? nlohmann::json(1e6 * *s) : nlohmann::json();
  };
  for (const auto& [label, r] : runs) {
    const auto pipeline = r.record().pipeline;
    run_json[label] = {{"rate", r.rate},
                       {"rate_from", r.rate_from.empty() ? "mean" : r.rate_from},
                       {"cv", r.cv},
                       {"wall_s", r.wall_s},
                       {"residency_before", residency_json(r.before)},
                       {"residency_after", residency_json(r.after)},
                       {"held_in_memory", r.held},
                       {"stall_pct", num(stall_pct_of(r))},
                       {"pipeline", pipeline ? pipeline->raw : nlohmann::json()},
                       {"report", r.report_path.string()},
                       {"log", r.log_path.string()}};
    if (r.nodes.empty()) continue;
    nlohmann::json per_node = nlohmann::json::array();
    for (const RunOutcome& n : r.nodes) {
      per_node.push_back({{"rate", n.rate},
                          {"cpu_per_item_us", cpu_us(n)},
                          {"report", n.report_path.string()},
                          {"log", n.log_path.string()}});
    }
    run_json[label]["nodes"] = per_node;
    run_json[label]["cpu_per_item_us"] = cpu_us(r);
  }
  return run_json;
}

// Coordinated prep's inputs: K jobs of this one, with and without --coordinated K.
struct CoordinatedSetup {
  CoordinatedJobs jobs;
  JobsSharing sharing;
  // The inputs at every corner of the uncertainty of the rates they come from (cpus-1, P, G), and
  // those rates in words ("" when none carries one: each measured once).
  std::vector<CoordinatedJobs> corners;
  std::string range_from;
};

CoordinatedSetup coordinated_setup(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs,
                                   const RawRates& raw, const Measured& in) {
  const auto& cp = in.cached_report.pipeline;
  const double side = cp ? static_cast<double>(cp->image_size.value_or(0)) : 0.0;
  const double sample_bytes = 3 * side * side * (cp && cp->output == "uint8" ? 1 : 4);
  const bool own_device = on_device(in.cached_report);
  // On a device the K jobs share this machine's GPUs (at least the one the runs used), and each
  // pays the host CPU the synthetic run's process took per sample (launches, the wait).
  DeviceHost device_host;
  const auto alone = cpu_per_item_s(*in.synthetic);
  if (own_device) {
    const int gpus = in.synthetic_report.machine ? static_cast<int>(in.synthetic_report.machine->gpus.size()) : 0;
    device_host.devices = std::max(1, gpus);
    device_host.host_cpu_s = alone.value_or(0.0);
  }
  // K synthetic runs at once (plan_shared_device_runs), where made: on a device, what each of K
  // jobs got of it; on a CPU, where K jobs' steps at once, each on CPUs of its own, slow each other
  // (caches, memory bandwidth), what each paid per sample beyond one alone.
  CoordinatedSetup c;
  for (int k : kCoordinatedJobs) {
    const auto it = runs.find(fmt::format("synthetic-x{}", k));
    if (it == runs.end()) continue;
    if (own_device) {
      if (it->second.rate > 0) c.sharing.device_rate[k] = it->second.rate;
    } else if (alone && !it->second.nodes.empty()) {
      if (const auto each = mean_cpu_per_item_s(it->second, 0, it->second.nodes.size())) {
        c.sharing.step_cpu_extra_s[k] = *each - *alone;
      }
    }
  }
  const MeasuredLoader& loader = in.loader;
  const double p1 = in.p_by_cores.count(1) ? in.p_by_cores.at(1) : 0.0;
  const double stage_s = stages_per_item_s(in.cached_report, {"fetch", "decode", "augment", "collate"}).value_or(0.0);
  const auto inputs = [&](double p1_at, double P_at, double G_at) {
    return coordinated_inputs(ctx.cores_now, p1_at, P_at, loader.known ? loader.shape.cpus : ctx.cores_now, G_at,
                              own_device, sample_bytes, raw.cached.mb_per_s * 1e6,
                              loader.known ? loader.shape.workers : 0, in.compute_cpus, stage_s, device_host);
  };
  c.jobs = inputs(p1, in.P, in.G);
  // P(1 CPU) where measured, else P; and G (the device's ceiling, or on a CPU the step's CPU).
  const double u_p1 = p1 > 0 && in.u_p_by_cores.count(1) ? in.u_p_by_cores.at(1) : 0.0;
  const double u_P = p1 > 0 ? 0.0 : in.u_P;
  for (const auto& f : corners_of({u_p1, u_P, in.u_G}))
    c.corners.push_back(inputs(p1 * f[0], in.P * f[1], in.G * f[2]));
  c.range_from = moving_rates({{"cpus-1", u_p1}, {"P", u_P}, {"G", in.u_G}});
  if (!c.range_from.empty()) c.range_from += " at ±1 standard error";
  return c;
}

// Partitioned cache's inputs: N nodes like this one (or sharing its CPUs), each caching 1/N
// (--node-cache), their misses on one storage of rate S, peers at the loopback rate measured.
struct PartitionedSetup {
  PartitionedNodes nodes;
  PeerCpu peer_cpu;
  std::string prep_cpu_from, prep_rate_from;
  bool known = false;  // the loopback peer rate was measured
};

PartitionedSetup partitioned_setup(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs,
                                   const RawRates& raw, const Measured& in, double S_model) {
  PartitionedSetup p;
  PartitionedNodes& nodes = p.nodes;
  nodes.prep_rate = in.P;
  nodes.device_rate = in.G;
  nodes.memory_rate = in.C;
  nodes.storage_rate = S_model;
  nodes.peer_rate = raw.peer_rate > 0 ? raw.peer_rate : std::numeric_limits<double>::infinity();
  nodes.memory_fraction = ctx.config.node_cache;
  nodes.shared_cpus = ctx.config.nodes_share_cpus;
  // The CPU budget: this machine's CPUs (each node's, or shared by the N), a sample's prep from
  // the one-CPU run, a peer fetch's CPU (both ends) from the loopback measurement.
  nodes.cores = ctx.cores_now;
  nodes.prep_cpu_s = in.p_by_cores.count(1) && in.p_by_cores.at(1) > 0 ? 1.0 / in.p_by_cores.at(1) : 0.0;
  // A peer request's CPU as nodes pay it, beside their decoding: the peer runs' CPU per sample,
  // N nodes with 1/N each and peers against N nodes with the whole dataset each, over the
  // requests to peers they made a sample. The back-to-back loopback figure otherwise.
  p.peer_cpu = peer_cpu_of(runs, raw, ctx.batch_size);
  nodes.peer_request_cpu_s = p.peer_cpu.used_s;
  nodes.batch_items = p.peer_cpu.batch_items;
  nodes.max_ids_per_request = p.peer_cpu.max_ids_per_request;
  // And a sample's CPU as nodes pay it: the peer-local runs' (N nodes at once on these CPUs,
  // every item from their item caches, three runs), where they were made. One `cpus-1` run
  // can be a slow moment of the host (docs/stall.md, "Partitioned cache: N nodes caching one dataset").
  p.prep_cpu_from = nodes.prep_cpu_s > 0 ? "cpus-1" : "none";
  if (p.peer_cpu.local_item_s && *p.peer_cpu.local_item_s > 0) {
    nodes.prep_cpu_s = *p.peer_cpu.local_item_s;
    p.prep_cpu_from = "peer-local";
  }
  // P, a node's prep ceiling (its workers'), is one `cached` run; the peer-local nodes, each with
  // the same flags and a share of the CPUs, reached their speed: the ceiling is at least that
  // (a `cached` run below it met a slow moment of the host, and would put the predictions low).
  p.prep_rate_from = "cached";
  if (const auto local = runs.find("peer-local"); local != runs.end() && local->second.rate > nodes.prep_rate) {
    nodes.prep_rate = local->second.rate;
    p.prep_rate_from = "peer-local";
  }
  p.known = raw.peer_rate > 0;
  return p;
}

// The remedies the what-if predicts (docs/stall.md, "The remedy that helps most"), and under
// --exec the notes that need no prediction, each for a stall of its kind (Compute: any).
struct Candidates {
  std::vector<Remedy> remedies;
  std::vector<std::pair<Bound, std::string>> exec_notes;
};

// A remedy's gain over the corners of the rates' uncertainty, `to` and `from` at each.
// Rates measured with no uncertainty (each run measured once, one observation) give no corners:
// the remedy then has no range (Remedy::range_from "") and is not named.
constexpr const char* kWhatIfRangeFrom =
    "the cache what-if at the corners of its rates' uncertainty (whatif.uncertainty)";

template <class To, class From>
Remedy with_range(const CacheWhatIf& w, Remedy r, const To& to, const From& from) {
  std::tie(r.gain_lo, r.gain_hi) = w.range_of([&](const CacheWhatIf::Model& m) { return to(m) / from(m); });
  r.range_from = w.ranged() ? kWhatIfRangeFrom : "";
  r.basis = "cache what-if";
  return r;
}

double uncached_at(const CacheWhatIf& w, const CacheWhatIf::Model& m) {
  return w.predict_with(m, 0.0, CacheKind::Item);
}

// mlbench's own remedies: the item cache and, with compute on a device of its own, twice the CPUs
// from this curve.
void benchmark_remedies(const AnalysisContext& ctx, const Measured& in, const CacheWhatIf& w, const Sizing& z,
                        Candidates& out) {
  const auto uncached = [&](const CacheWhatIf::Model& m) { return uncached_at(w, m); };
  const double x = z.cache_rec.value_or(1.0);
  out.remedies.push_back(with_range(
      w,
      {"item cache",
       z.cache_rec ? fmt::format("{:.0f}% of the dataset in the item cache (--cache-size)", 100 * *z.cache_rec)
                   : std::string("the whole dataset in the item cache (memory reads still limit it)"),
       w.predict(0.0, CacheKind::Item), w.predict(x, CacheKind::Item), Bound::Fetch},
      [&](const CacheWhatIf::Model& m) { return w.predict_with(m, x, CacheKind::Item); }, uncached));
  if (!on_device(in.cached_report) || w.nominal().sm) return;
  ReadCpu twice = in.read_cpu;  // the reads' CPU, too, spread over twice the CPUs
  twice.cpus *= 2;
  // Prep scaled linearly: the read-ahead loader with twice the workers on twice the CPUs.
  const auto doubled = [&](const CacheWhatIf::Model& m) {
    // Over HTTP the fetch is the io-depth what-if's, as the remedy's `from` is (a storage device's
    // model here mixed two models in one gain).
    if (const auto http = w.http_speed_with_twice_the_cpus(m)) return *http;
    if (m.ra) {
      ReadAheadModel more = *m.ra;
      more.shape.workers *= 2;
      more.shape.cpus *= 2;
      more.shape.prefetch *= 2;  // the loader's default prefetch grows with its workers
      return readahead_speed(more, 0.0, CacheKind::Item);
    }
    return predicted_speed(0.0, 2 * m.P, m.G, m.C, m.S_model, m.exposed, CacheKind::Item, twice);
  };
  out.remedies.push_back(with_range(
      w,
      {"more CPUs",
       fmt::format("{} CPUs instead of {}, prep scaled linearly, no cache", 2 * ctx.cores_now, ctx.cores_now),
       w.predict(0.0, CacheKind::Item), doubled(w.nominal()), Bound::Prep},
      doubled, uncached));
}

// Under --exec: RAM for the OS page cache, and a copy of the dataset on faster storage.
void exec_fetch_remedies(const AnalysisContext& ctx, const RawRates& raw, const CacheWhatIf& w, const Sizing& z,
                         Candidates& out) {
  const double gb = ctx.dataset_bytes / 1e9;
  if (z.page_cache_rec && *z.page_cache_rec > 0) {
    const double x = *z.page_cache_rec;
    const auto page_at = [&](const CacheWhatIf::Model& m) { return w.predict_with(m, x, CacheKind::Page); };
    const auto page_cold = [&](const CacheWhatIf::Model& m) { return w.predict_with(m, 0.0, CacheKind::Page); };
    out.remedies.push_back(with_range(
        w,
        {"OS page cache",
         gb > 0 ? fmt::format("{:.1f} GB of RAM free for the OS page cache, {:.0f}% of the dataset's {:.1f} GB "
                              "(preload it with `vmtouch -t {}` or `cat` the files once)",
                              x * gb, 100 * x, gb, ctx.config.data)
                : fmt::format("{:.0f}% of the dataset in the OS page cache (RAM)", 100 * x),
         page_cold(w.nominal()), page_at(w.nominal()), Bound::Fetch},
        page_at, page_cold));
  }
  // Faster storage: the smallest speed-up of S whose uncached speed reaches the plateau's share.
  const double best = w.storage_speed(w.nominal(), 1000.0);
  if (!(best > 1.02 * w.storage_speed(w.nominal(), 1.0))) return;
  double lo = 1.0, hi = 1000.0;
  for (int i = 0; i < 40; ++i) {
    const double mid = std::sqrt(lo * hi);
    (w.storage_speed(w.nominal(), mid) >= kPlateauShare * best ? hi : lo) = mid;
  }
  const double S_model = w.nominal().S_model;
  const double mb_s = S_model * hi * raw.mean_file_bytes / 1e6;
  out.remedies.push_back(with_range(
      w,
      {"faster storage",
       fmt::format("a copy of the dataset on storage serving {:.0f} samples/s{} (now {:.0f}/s)", S_model * hi,
                   raw.mean_file_bytes > 0 ? fmt::format(", {:.0f} MB/s of random reads of its files", mb_s) : "",
                   S_model),
       w.storage_speed(w.nominal(), 1.0), w.storage_speed(w.nominal(), hi), Bound::Fetch},
      [&](const CacheWhatIf::Model& m) { return w.storage_speed(m, hi); },
      [&](const CacheWhatIf::Model& m) { return w.storage_speed(m, 1.0); }));
}

// mlbench's own loader as the alternative to the script's: measured on the same files where the
// analysis ran it (the mlbench-loader run), else the command that measures it.
std::string mlbench_loader_note(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs, double P) {
  if (const auto it = runs.find("mlbench-loader"); it != runs.end() && it->second.rate > 0) {
    const auto lp = it->second.record().pipeline;
    const std::int64_t side_px = lp ? lp->image_size.value_or(0) : 0;
    return fmt::format(
        "an alternative to the script's loader: mlbench's own prepared {:.0f} samples/s from these files "
        "on this machine ({} workers{}), against the script's {:.0f} with the data cached (measured: "
        "run mlbench-loader)",
        it->second.rate, lp ? lp->workers.value_or(0) : 0,
        side_px > 0 ? fmt::format(", {} px crops", side_px) : std::string(), P);
  }
  return fmt::format(
      "an alternative to the script's loader: mlbench's own (`mlbench-stall --bench loader --data {}` measures what "
      "it reaches on this machine)",
      ctx.config.data);
}

// Under --exec: more CPUs for the DataLoader's workers, and the notes: num_workers, pin_memory,
// mlbench's own loader on the same files.
void exec_cpu_remedies(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs, const Measured& in,
                       const CacheWhatIf& w, const Sizing& z, Candidates& out) {
  const int workers =
      in.loader.known ? in.loader.shape.workers : static_cast<int>(in.cached_report.workers.value_or(0));
  // A job of K ranks per node shares the CPUs among K loaders: the advice is per rank, and the job's
  // what-if (stall/job_whatif.h, `job_whatif.advice`) says how many CPUs per rank.
  int ranks = 1;
  for (const auto& [label, r] : runs) ranks = std::max(ranks, ranks_per_node(r));
  if (ranks > 1) {
    const int per_rank = std::max(1, ctx.cores_now / ranks);
    if (workers < per_rank) {
      out.exec_notes.emplace_back(
          Bound::Prep, fmt::format("DataLoader(num_workers={}) per rank on {} CPU(s) each ({} ranks on {} CPUs): "
                                   "num_workers={} per rank uses them all (not measured)",
                                   workers, per_rank, ranks, ctx.cores_now, per_rank));
    }
  } else if (z.cores_rec && *z.cores_rec > ctx.cores_now) {
    const double p_new = z.p_for_advice.at(*z.cores_rec);
    // The sweep's run at that count has a noise of its own (its observations, its rounds).
    const auto u_it = in.u_p_by_cores.find(*z.cores_rec);
    const double u_new = *z.cores_rec == ctx.cores_now ? 0.0 : u_it != in.u_p_by_cores.end() ? u_it->second : 0.0;
    const auto more_at = [&](const CacheWhatIf::Model& m, double f) {
      return predicted_speed(0.0, f * p_new * m.P / in.P, m.G, m.C, m.S_model, m.exposed, CacheKind::Page, in.read_cpu);
    };
    const auto more = [&](const CacheWhatIf::Model& m) { return more_at(m, 1.0); };
    const auto uncached = [&](const CacheWhatIf::Model& m) { return uncached_at(w, m); };
    Remedy r = with_range(
        w,
        {"more CPUs",
         fmt::format("{} CPUs for the script, DataLoader(num_workers={}) (measured: prep {:.0f} samples/s on {})",
                     *z.cores_rec, std::max(workers, *z.cores_rec), p_new, *z.cores_rec),
         uncached_at(w, w.nominal()), more(w.nominal()), Bound::Prep},
        more, uncached);
    if (u_new > 0 && u_new < 1) {
      for (double f : {1 - u_new, 1 + u_new}) {
        const auto [lo, hi] =
            w.range_of([&](const CacheWhatIf::Model& m) { return more_at(m, f) / uncached_at(w, m); });
        r.gain_lo = std::min(r.gain_lo, lo);
        r.gain_hi = std::max(r.gain_hi, hi);
      }
      r.range_from = fmt::format("{}{}cpus-{} at ±1 standard error", r.range_from, r.range_from.empty() ? "" : ", and ",
                                 *z.cores_rec);
    }
    out.remedies.push_back(r);
  } else if (workers < ctx.cores_now) {
    out.exec_notes.emplace_back(Bound::Prep, fmt::format("DataLoader(num_workers={}) on {} CPUs: num_workers={} uses "
                                                         "them all (not measured)",
                                                         workers, ctx.cores_now, ctx.cores_now));
  }
  if (on_device(in.cached_report) && in.cached_report.pipeline && in.cached_report.pipeline->pin_memory == false) {
    out.exec_notes.emplace_back(
        Bound::Compute, "DataLoader(pin_memory=True): the copies to the GPU then overlap the step (not measured)");
  }
  out.exec_notes.emplace_back(Bound::Compute, mlbench_loader_note(ctx, runs, in.P));
}

// CoorDL's remedies from their own models: the partitioned cache for 2 nodes, coordinated prep
// for 2 jobs.
void coordl_remedies(const Measured& in, const PartitionedSetup& part, const CoordinatedSetup& coord, bool withheld,
                     Candidates& out) {
  if (!withheld && part.known) {
    PartitionedNodes two = part.nodes;
    two.nodes = 2;
    if (two.memory_fraction <= 0) two.memory_fraction = 0.5;
    const PartitionedPrediction pp = predict_partitioned(two);
    Remedy r{"partitioned cache",
             fmt::format("2 nodes{}, each caching {:.0f}% of the dataset, partitioned (--peers), per node",
                         two.shared_cpus ? " on this machine" : " like this one", 100 * two.memory_fraction),
             pp.own, pp.partitioned, Bound::Fetch};
    // Its range: the rates it takes (P, G, C, S) at the corners of their uncertainty, and each pair of
    // peer runs' own k and p (as whatif.partitioned's partitioned_range). It takes S and C as the cache
    // what-if does: withheld with it.
    r.gain_lo = r.gain_hi = r.gain();
    const auto gain_of = [](const PartitionedNodes& n) {
      const PartitionedPrediction p = predict_partitioned(n);
      return p.own > 0 ? p.partitioned / p.own : 0.0;
    };
    const auto widen = [&](double g) {
      if (g > 0 && std::isfinite(g)) r.gain_lo = std::min(r.gain_lo, g), r.gain_hi = std::max(r.gain_hi, g);
    };
    const bool p_from_sweep = part.prep_cpu_from == "cpus-1";
    const double u_p1 = p_from_sweep && in.u_p_by_cores.count(1) ? in.u_p_by_cores.at(1) : 0.0;
    for (const auto& f : corners_of({in.u_P, in.u_G, in.u_C, in.u_S, u_p1})) {
      PartitionedNodes c = two;
      c.prep_rate *= f[0];
      c.device_rate *= f[1];
      c.memory_rate *= f[2];
      c.storage_rate *= f[3];
      c.prep_cpu_s /= f[4];
      widen(gain_of(c));
    }
    const bool by_pair_k = part.peer_cpu.source == "nodes", by_pair_p = part.prep_cpu_from == "peer-local";
    const bool pairs = (by_pair_k || by_pair_p) && part.peer_cpu.pairs_s.size() > 1;
    for (std::size_t i = 0; pairs && i < part.peer_cpu.pairs_s.size(); ++i) {
      PartitionedNodes c = two;
      if (by_pair_k) c.peer_request_cpu_s = std::max(0.0, part.peer_cpu.pairs_s[i]);
      if (by_pair_p) c.prep_cpu_s = part.peer_cpu.pairs_local_s[i];
      widen(gain_of(c));
    }
    std::string rates = moving_rates({{"P", in.u_P}, {"G", in.u_G}, {"C", in.u_C}, {"S", in.u_S}, {"cpus-1", u_p1}});
    if (!rates.empty()) rates += " at ±1 standard error";
    if (pairs) rates += std::string(rates.empty() ? "" : ", and ") + "each pair of peer runs' own k and p";
    r.range_from = rates;
    r.basis = "cache what-if";
    out.remedies.push_back(r);
  }
  // Coordinated prep: its own CPU-budget model (coordinated_model.h), from the cpus-1, cached and
  // synthetic runs, which the cache what-if's self-check does not test. Its range: the model at the
  // corners of those rates' uncertainty.
  const auto gain2 = [&](const CoordinatedJobs& jobs) {
    const CoordinatedPrediction p = predict_coordinated(for_jobs(jobs, 2, coord.sharing));
    return std::pair{p.uncoordinated, p.coordinated};
  };
  const auto [from, to] = gain2(coord.jobs);
  Remedy r{"coordinated prep", "2 jobs on this machine under --coordinated 2, per job", from, to, Bound::Prep};
  r.gain_lo = r.gain_hi = r.gain();
  for (const CoordinatedJobs& c : coord.corners) {
    const auto [f, t] = gain2(c);
    if (f > 0 && std::isfinite(t / f)) r.gain_lo = std::min(r.gain_lo, t / f), r.gain_hi = std::max(r.gain_hi, t / f);
  }
  r.range_from = coord.range_from;
  r.basis = "own model";
  out.remedies.push_back(r);
}

nlohmann::json remedy_json(const Remedy& r) {
  return nlohmann::json{{"name", r.name},
                        {"detail", r.detail},
                        {"from", r.from},
                        {"to", r.to},
                        {"gain", r.gain()},
                        {"gain_range", {r.low(), r.high()}},
                        {"range_from", r.range_from.empty() ? nlohmann::json() : nlohmann::json(r.range_from)},
                        {"basis", r.basis},
                        {"stall", r.stall == Bound::Fetch ? "fetch" : "prep"}};
}

nlohmann::json share_json(const StallShare& sh) {
  return nlohmann::json{{"pct", sh.pct},
                        {"noise_pp", sh.noise_pp},
                        {"max_pct", sh.max_pct},
                        {"effective_pct", sh.effective()},
                        {"possible", sh.possible()},
                        {"claimed", sh.claimed()},
                        {"text", share_text(sh)}};
}

nlohmann::json storage_json(const RawRates& raw) {
  const double mb = raw.mean_file_bytes / 1e6;
  return {{"seq_cold_MBps", raw.seq_cold.mb_per_s},
          {"rand_cold_MBps", raw.rand_cold.mb_per_s},
          {"cached_MBps", raw.cached.mb_per_s},
          {"mean_file_bytes", raw.mean_file_bytes},
          {"peer_rate", raw.peer_rate > 0 ? nlohmann::json(raw.peer_rate) : nlohmann::json()},
          {"peer_cpu_us", raw.peer_rate > 0 ? nlohmann::json(1e6 * raw.peer_cpu_s) : nlohmann::json()},
          {"peer_ids_per_request", raw.peer_rate > 0 ? nlohmann::json(raw.peer_ids_per_request) : nlohmann::json()},
          {"S_raw", mb > 0 ? num(raw.rand_cold.mb_per_s / mb) : nlohmann::json()},
          {"C_raw", mb > 0 ? num(raw.cached.mb_per_s / mb) : nlohmann::json()},
          {"unit_raw", "samples/s from whole-file reads"}};
}

// The split and its check against the cold run's own instrumentation.
void add_split_json(const Measured& in, nlohmann::json& out) {
  const Split& s = in.split;
  const double direct_cold = stall_pct_of(*in.cold);
  out["split"] = {{"compute_pct", s.compute_pct}, {"prep_pct", s.prep_pct}, {"fetch_pct", s.fetch_pct}};
  out["split_raw"] = {{"compute_pct", s.raw_compute_pct}, {"prep_pct", s.raw_prep_pct}, {"fetch_pct", s.raw_fetch_pct}};
  out["noise_pp"] = {{"compute", in.noise.compute_pp}, {"prep", in.noise.prep_pp}, {"fetch", in.noise.fetch_pp}};
  out["cv"] = {{"G", in.synthetic->cv},
               {"P", in.cached->cv},
               {"F_obs", in.cold->cv},
               {"C", in.fetch_cached->cv},
               {"S", in.fetch_cold->cv}};
  out["direct"] = {
      {"stall_pct_cold", num(direct_cold)},
      {"stall_pct_cached", num(stall_pct_of(*in.cached))},
      {"differential_stall_pct", s.prep_pct + s.fetch_pct},
      {"disagreement_pp", num(std::abs(direct_cold - (s.prep_pct + s.fetch_pct)))},
      {"note", std::isfinite(direct_cold) ? disagreement_note(direct_cold, s.prep_pct + s.fetch_pct,
                                                              std::max(in.noise.prep_pp, in.noise.fetch_pp))
                                          : std::string()}};
  out["prep_by_cores"] = in.sweep;
}

// What the analysis judged and what it names: stall.json's recommendation.
struct Judgement {
  StallShare fetch, prep;
  Decision decision;
  Verdict verdict;
  nlohmann::json advice;
  bool withheld = false;
  std::string withheld_note;  // what the self-check's failure withholds, and what stands ("" when it passed)
};

// What a failed self-check withholds (docs/stall.md, "Answers you can act on"): the remedies the cache
// what-if predicts, and the partitioned cache, which takes its S and C; not coordinated prep or io
// depth, whose own models the check does not test: they stand on their own ranges.
std::string withheld_note(bool exec, const std::vector<Remedy>& standing) {
  std::string kept;
  for (const Remedy& r : standing) {
    if (r.basis == "own model") kept += (kept.empty() ? "" : ", ") + r.name;
  }
  return fmt::format(
      "the self-check's failure withholds the remedies the cache what-if predicts ({}){}",
      exec ? "OS page cache, faster storage, more CPUs" : "item cache, more CPUs, partitioned cache",
      kept.empty() ? std::string()
                   : "; not those with a model and runs of their own, which the self-check does not test: they stand "
                     "on their own ranges (" +
                         kept + ")");
}

nlohmann::json recommendation_json(const Judgement& j, const Sizing& z, const CacheWhatIf& w) {
  const bool withheld = j.withheld;
  const auto& cache_rec = z.cache_rec;
  const auto rec_range = cache_rec ? w.range_at(*cache_rec, CacheKind::Item) : std::pair<double, double>{0, 0};
  nlohmann::json remedies = nlohmann::json::array();
  for (const Remedy& r : j.decision.ranked) remedies.push_back(remedy_json(r));
  const auto when = [&](bool ok, const std::optional<double>& v) {
    return ok && v ? nlohmann::json(*v) : nlohmann::json();
  };
  return {
      {"cache_fraction", when(!withheld && j.fetch.claimed(), cache_rec)},
      {"knee_fraction", when(!withheld, z.knee)},
      {"plateau_share", kPlateauShare},
      {"predicted", cache_rec && !withheld ? nlohmann::json(w.predict(*cache_rec, CacheKind::Item)) : nlohmann::json()},
      {"predicted_range",
       cache_rec && !withheld ? nlohmann::json{rec_range.first, rec_range.second} : nlohmann::json()},
      {"advice", j.advice},
      {"cache", "item cache"},
      {"page_cache_fraction", when(!withheld && j.fetch.claimed(), z.page_cache_rec)},
      {"cores", z.cores_rec && !withheld ? nlohmann::json(*z.cores_rec) : nlohmann::json()},
      {"withheld", withheld},
      {"withheld_note", j.withheld_note.empty() ? nlohmann::json() : nlohmann::json(j.withheld_note)},
      {"bound", j.verdict.label()},
      {"inconclusive", j.decision.inconclusive},
      {"measure_factor", j.decision.measure_factor ? nlohmann::json(*j.decision.measure_factor) : nlohmann::json()},
      {"verdict", j.verdict.text},
      {"remedy", j.decision.remedy ? remedy_json(*j.decision.remedy) : nlohmann::json()},
      {"remedies", remedies},
      {"not_named", j.decision.not_named},
      {"remedy_text", j.decision.remedy_text}};
}

nlohmann::json model_json(const Measured& in, const CacheWhatIf& w) {
  const auto& sm = w.nominal().sm;
  const auto& ra = w.nominal().ra;
  const MeasuredLoader& loader = in.loader;
  // Over HTTP the curve is the io-depth what-if's (CacheWhatIf::http_speed), not a storage device's
  // read-ahead model: that one is neither named nor shown (its cold-run error was of a model unused).
  const bool http = in.http != nullptr;
  return {{"model", http             ? "http"
                    : in.serial      ? "serial"
                    : in.reads_ahead ? "read-ahead"
                                     : "overlap"},
          {"model_formula",
           http ? fmt::format("the io-depth what-if at the cold run's {} requests in flight ({}); a share x cached "
                              "spares x of the requests",
                              in.http->from_depth(), remote_formula(*in.http))
           : in.reads_ahead ? readahead_formula(loader.window)
                            : whatif_formula(in.serial, w.nominal().exposed, in.read_cpu.active())},
          {"cache", "item cache"},
          {"io_depth", loader.io_depth},
          {"loader", loader.known ? nlohmann::json{{"workers", loader.shape.workers},
                                                   {"prep_cpus", loader.shape.cpus},
                                                   {"batch_size", loader.shape.batch_size},
                                                   {"prefetch", loader.shape.prefetch}}
                                  : nlohmann::json()},
          {"serial", sm ? serial_json(*sm, in.F_obs) : nlohmann::json()},
          {"read_ahead", ra && !http ? readahead_json(*ra, in.F_obs) : nlohmann::json()},
          {"exposed_fetch_us", 1e6 * w.nominal().exposed},
          {"read_cpu", in.read_cpu.active() ? nlohmann::json{{"storage_extra_us", 1e6 * in.read_cpu.storage_extra_s},
                                                             {"page_read_us", 1e6 * in.read_cpu.page_read_s},
                                                             {"cpus", in.read_cpu.cpus}}
                                            : nlohmann::json()}};
}

nlohmann::json uncertainty_json(const AnalysisContext& ctx, const Measured& in) {
  return {{"G", in.u_G},
          {"P", in.u_P},
          {"F_obs", in.u_F},
          {"S", in.u_S},
          {"C", in.u_C},
          {"from", ctx.round_rates.empty() ? "each run's observations (sd / sqrt(n))"
                                           : "each run's observations or the spread of its rounds, the larger"}};
}

// stall.json's whatif: the model, its curves and measured points, and the remedies' models.
nlohmann::json whatif_json(const AnalysisContext& ctx, const Measured& in, const CacheWhatIf& w, const Sizing& z,
                           const MeasuredPoints& pts, bool withheld, const CoordinatedSetup& coord,
                           const PartitionedSetup& part) {
  const auto& sm = w.nominal().sm;
  const auto& ra = w.nominal().ra;
  nlohmann::json j = model_json(in, w);
  j["page_cache"] = {
      {"cache", "page cache"},
      {"hit_us", sm   ? nlohmann::json(1e6 * sm->page_hit_s)
                 : ra ? nlohmann::json(1e6 * ra->page_hit_s)
                      : nlohmann::json(1e6 / in.C)},
      {"recommended_fraction", z.page_cache_rec && !withheld ? nlohmann::json(*z.page_cache_rec) : nlohmann::json()},
      {"knee_fraction", z.page_knee && !withheld ? nlohmann::json(*z.page_knee) : nlohmann::json()},
      {"curve", w.curve_json(CacheKind::Page)},
      {"measured", pts.page}};
  j["uncertainty"] = uncertainty_json(ctx, in);
  j["curve"] = w.curve_json(CacheKind::Item);
  j["measured"] = pts.item;
  j["max_error_pct"] = pts.item.empty() ? nlohmann::json() : nlohmann::json(pts.max_err);
  j["mean_error_pct"] = pts.item.empty() ? nlohmann::json() : nlohmann::json(pts.sum_err / pts.item.size());
  nlohmann::json storage = nlohmann::json::array();
  for (double factor : {0.5, 2.0, 4.0, 10.0}) {
    storage.push_back({{"S_factor", factor},
                       {"S", w.nominal().S_model * factor},
                       {"speed_uncached", w.storage_speed(w.nominal(), factor)}});
  }
  j["storage"] = storage;
  j["coordinated"] = coordinated_whatif_json(coord.jobs, kCoordinatedJobs, coord.sharing);
  j["partitioned"] = part.known ? partitioned_json(part.nodes, part.peer_cpu, part.prep_cpu_from, part.prep_rate_from)
                                : nlohmann::json();
  return j;
}

// Tar shards (the cached run's pipeline.source_detail): they are read sequentially, so storage
// serves them at its sequential rate, and WebDataset's shuffle buffer holds samples in memory.
// Null for other sources (and in older results).
nlohmann::json shards_json(const RawRates& raw, const Measured& in) {
  const nlohmann::json* p =
      in.cached && in.cached->report.contains("pipeline") ? &in.cached->report["pipeline"] : nullptr;
  if (!p || !p->is_object() || p->value("source", "") != "tar-shards" || !p->contains("source_detail")) return nullptr;
  const nlohmann::json& d = (*p)["source_detail"];
  if (!d.is_object()) return nullptr;
  const double seq = raw.seq_cold.mb_per_s, rnd = raw.rand_cold.mb_per_s;
  const double mean = d.value("mean_sample_bytes", 0.0);
  const auto buffer = d.value("shuffle_buffer", 0);
  const auto lanes = d.value("lanes", 0);
  const double buffer_mb = d.value("shuffle_buffer_bytes", 0.0) / 1e6;
  const double seq_rate = mean > 0 ? seq * 1e6 / mean : 0;
  return {{"shards", d.value("shards", 0)},
          {"sequential_MBps", seq},
          {"random_MBps", rnd},
          {"sequential_samples_per_s", seq_rate},
          {"shuffle_buffer", buffer},
          {"lanes", lanes},
          {"shuffle_buffer_MB", buffer_mb},
          {"advice",
           fmt::format("tar shards are read sequentially: storage serves them at {:.1f} MB/s ({:.0f} samples/s; random "
                       "reads of small files: {:.1f} MB/s); the shuffle buffer holds {} samples in each of {} lanes, "
                       "{:.0f} MB of memory (--shuffle-buffer: more mixes better and costs memory, not speed)",
                       seq, seq_rate, rnd, buffer, lanes, buffer_mb)}};
}

// Which shares are stalls, the bound, the verdict and the remedy: one judgement (stall/decision.h).
Judgement judge(const AnalysisContext& ctx, const Measured& in, const CacheWhatIf& w, const Sizing& z,
                const SelfCheck& check, const Candidates& candidates) {
  Judgement j;
  j.withheld = !check.passed;
  j.fetch = fetch_share(in.split, in.noise, in.F_obs, w.nominal().S_model);
  j.prep = prep_share(in.split, in.noise, in.G, in.P, in.F_obs);
  const int rounds = ctx.round_rates.empty() ? 1 : static_cast<int>(ctx.round_rates.begin()->second.size());
  j.decision = decide({in.split, j.fetch, j.prep, z.cache_rec, z.cores_rec, ctx.cores_now, candidates.remedies,
                       in.noise.compute_pp, ctx.config.iterations, rounds});
  Verdict plain{j.decision.bound, j.decision.verdict, j.decision.inconclusive};
  // No page cache holds an object fetched over HTTP.
  if (j.fetch.claimed() && z.cache_rec && *z.cache_rec > 0.0 && z.page_cache_rec && !ctx.exec && !in.http) {
    plain.text += fmt::format(
        " (the cache is mlbench's item cache, --cache-size; in the OS page cache instead: {:.0f}% "
        "cached)",
        100 * *z.page_cache_rec);
  }
  j.verdict = checked_verdict(plain, check);
  if (j.withheld) j.withheld_note = withheld_note(ctx.exec, candidates.remedies);
  // Beyond the remedy named, what the user can do that needs no prediction (under --exec).
  j.advice = nlohmann::json::array();
  for (const auto& [stall, note] : candidates.exec_notes) {
    const bool any = j.fetch.claimed() || j.prep.claimed();
    if (stall == Bound::Prep ? j.prep.claimed() : any) j.advice.push_back(note);
  }
  return j;
}

std::optional<RemoteWhatIf> http_whatif(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs,
                                        const RawRates& raw, const Measured& in) {
  // A dataset over HTTP: the io-depth what-if, checked against the cold run, the --io-depths runs
  // and the partial cache runs (the model takes L and B from the probe and P from the cached run,
  // so none of them is used).
  if (!raw.remote.known()) return std::nullopt;
  // Each run's requests in flight as it ran: without --io-depth the loader adapts them over HTTP,
  // and runs may settle apart. L is the fetch-alone run's, at its depth.
  const int loader_depth = in.loader.io_depth > 0 ? in.loader.io_depth : std::max(1, in.loader.shape.workers);
  const auto depth_of = [&](const RunOutcome& r) {
    const auto p = r.record().pipeline;
    return p && p->io_depth > 0 ? static_cast<int>(p->io_depth) : loader_depth;
  };
  const int depth_now = in.fetch_cold ? depth_of(*in.fetch_cold) : loader_depth;
  const int depth_cold = in.cold ? depth_of(*in.cold) : depth_now;
  // A held-out run's own noise (its 95% half-width: sized, or from its observations) and where its
  // requests' cycle went (its loader's read-ahead).
  const auto held_out = [&](DepthPoint p, const RunOutcome* r) {
    if (!r) return p;
    p.u_measured = r->half_width.value_or(1.96 * r->cv / std::sqrt(std::max(1.0, double(r->observations))));
    if (const auto pl = r->record().pipeline; pl && pl->read_ahead_per_read_ms && pl->read_ahead_queue_wait_ms) {
      const double waited = pl->read_ahead_takes_waited.value_or(0);
      p.read_ms = *pl->read_ahead_per_read_ms;
      p.beside_ms = *pl->read_ahead_queue_wait_ms + waited * pl->read_ahead_wake_ms.value_or(0) +
                    (1 - waited) * pl->read_ahead_item_wait_ms.value_or(0);
    }
    return p;
  };
  std::vector<DepthPoint> points{held_out({"cold", depth_cold, in.F_obs, 0, 0}, in.cold)};
  for (const auto& [label, r] : runs) {
    const RunSpec spec = spec_of(label, r);
    if (spec.kind == "iodepth" && spec.io_depth > 0) {
      points.push_back(held_out({label, spec.io_depth, r.rate, 0, 0}, &r));
    }
    if (spec.kind == "cache" && spec.cache_frac > 0 && spec.cache_frac < 1) {
      points.push_back(held_out({label, depth_of(r), r.rate, 0, spec.cache_frac}, &r));
    }
  }
  const RemoteRates rates = with_loader_latency(raw.remote, depth_now, in.S, in.u_S);
  const int prep_cpus = in.loader.known ? in.loader.shape.cpus : std::max(1, ctx.cores_now);
  const RequestCpu cpu = request_cpu_of(runs, prep_cpus, core::logical_cores());
  std::optional<RemoteLoader> loader;
  if (in.loader.known && in.G > 0 && in.P > 0) loader = calibrate_remote_loader(in.loader.shape, in.G, in.P);
  RemoteWhatIf remote = remote_whatif(rates, in.P, in.u_P, depth_now, points, cpu, loader, loaded_latency_of(runs));
  remote.depth_run = depth_cold;
  return remote;
}

}  // namespace

nlohmann::json analyze(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs, const RawRates& raw) {
  Measured in = measure(ctx, runs);
  // Over HTTP the cache what-if takes its fetch from the io-depth what-if (cache_whatif.h).
  const std::optional<RemoteWhatIf> remote = http_whatif(ctx, runs, raw, in);
  in.http = remote ? &*remote : nullptr;
  const CacheWhatIf w(in);
  const Sizing z = size_remedies(ctx, in, w);
  const MeasuredPoints pts = measured_points(ctx, runs, in, w);
  const SelfCheck check = self_check(pts.check, in.P, in.G, kSelfCheckThresholdPct, in.simulated, in.reads_ahead);
  // A curve that misses the measured speed beyond its range recommends nothing: the cache
  // fraction comes from it, and the CPU count from the speed it promises.
  const bool withheld = !check.passed;
  const CoordinatedSetup coord = coordinated_setup(ctx, runs, raw, in);
  const PartitionedSetup part = partitioned_setup(ctx, runs, raw, in, w.nominal().S_model);
  Candidates candidates;
  if (!withheld && !ctx.exec) benchmark_remedies(ctx, in, w, z, candidates);
  // Under --exec, remedies the script can apply (docs/stall.md, "Advice in your script's terms");
  // mlbench's own flags are not the script's.
  if (!withheld && ctx.exec) {
    exec_fetch_remedies(ctx, raw, w, z, candidates);
    exec_cpu_remedies(ctx, runs, in, w, z, candidates);
  }
  if (!ctx.exec) coordl_remedies(in, part, coord, withheld, candidates);
  if (remote && remote->passed) {
    if (auto r = io_depth_remedy(*remote)) candidates.remedies.push_back(*r);
  }
  const Judgement j = judge(ctx, in, w, z, check, candidates);
  nlohmann::json out = {// What each version added: beside kStallSchemaVersion (stall/analyzer.h).
                        {"schema_version", kStallSchemaVersion},
                        {"bench", ctx.config.bench},
                        {"data", ctx.config.data},
                        {"items", ctx.items},
                        {"batch_size", ctx.batch_size},
                        {"cores", ctx.cores_now},
                        {"iterations", ctx.config.iterations},
                        {"rates",
                         {{"G", in.G},
                          {"P", in.P},
                          {"F_obs", in.F_obs},
                          {"C", in.C},
                          {"S", in.S},
                          {"S_model", w.nominal().S_model},
                          {"unit", "samples/s"}}},
                        {"storage", storage_json(raw)}};
  add_split_json(in, out);
  out["findings"] = {{"fetch", share_json(j.fetch)}, {"prep", share_json(j.prep)}, {"sigmas", kSignificanceSigmas}};
  out["recommendation"] = recommendation_json(j, z, w);
  out["self_check"] = self_check_json(check);
  out["whatif"] = whatif_json(ctx, in, w, z, pts, withheld, coord, part);
  // Null for local files (absent in older results: read as null).
  out["whatif"]["http"] = remote ? remote_whatif_json(*remote) : nlohmann::json();
  out["whatif"]["shards"] = shards_json(raw, in);
  if (!out["whatif"]["shards"].is_null()) out["recommendation"]["shards"] = out["whatif"]["shards"]["advice"];
  // Under --exec, each epoch's start (stall/epoch_start.h): a finding and, when claimed, its advice.
  if (const auto cached = runs.find("cached"); ctx.exec && cached != runs.end()) {
    add_epoch_start_finding(cached->second.report, out);
  }
  out["warnings"] = analysis_warnings(runs, in);
  out["runs"] = runs_json(runs);
  // A job of several ranks (--exec; stall/ranks.h): each rank's figures and the straggler.
  add_ranks_block(runs, out);
  add_nodes_block(out);  // and across nodes (stall/nodes.h): each rank's node and CPUs, each node's page cache
  // Its CPUs per rank and DRAM (stall/job_whatif.h): the job's what-if, held out, advised.
  add_job_whatif(ctx, runs, out);
  return out;
}

const RunOutcome& median_run(const std::vector<RunOutcome>& rounds) {
  if (rounds.empty()) throw std::invalid_argument("a run with no round");
  std::vector<const RunOutcome*> sorted;
  for (const auto& r : rounds) sorted.push_back(&r);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const RunOutcome* a, const RunOutcome* b) { return a->rate < b->rate; });
  return *sorted[(sorted.size() - 1) / 2];
}

nlohmann::json rounds_json(const std::map<std::string, std::vector<RunOutcome>>& rounds, int count) {
  nlohmann::json rates = nlohmann::json::object();
  for (const auto& [label, runs] : rounds) {
    const RunOutcome& chosen = median_run(runs);
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : runs) all.push_back(r.rate);
    const auto [lo, hi] =
        std::minmax_element(runs.begin(), runs.end(), [](auto& a, auto& b) { return a.rate < b.rate; });
    rates[label] = {{"rates", all},
                    {"chosen", chosen.rate},
                    {"spread_pct", chosen.rate > 0 ? 100 * (hi->rate - lo->rate) / chosen.rate : 0.0},
                    {"report", chosen.report_path.string()}};
  }
  return {{"count", count}, {"runs", rates}};
}

}  // namespace mlbench::stall
