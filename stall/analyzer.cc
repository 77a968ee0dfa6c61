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

#include "analysis.h"
#include "coordinated_model.h"
#include "decision.h"
#include "partitioned_model.h"
#include "readahead_model.h"
#include "serial_model.h"

namespace mlbench::stall {

std::optional<double> cpu_per_item_s(const RunOutcome& r, bool system_only) {
  const auto& c = r.report.value("process_cpu", nlohmann::json());
  if (!c.is_object() || !c.value("per_item_us", nlohmann::json()).is_number()) return std::nullopt;
  const double all = c["per_item_us"].get<double>() / 1e6;
  if (!system_only) return all;
  if (!c.value("user_s", nlohmann::json()).is_number() || !c.value("sys_s", nlohmann::json()).is_number()) {
    return std::nullopt;
  }
  const double user = c["user_s"].get<double>(), sys = c["sys_s"].get<double>();
  return user + sys > 0 ? all * sys / (user + sys) : 0.0;
}

namespace {

// The pipeline's stage timers per item in a run's report (pipeline.stages.<name>.per_item_ms),
// summed over `names`, in seconds; nullopt when none of them is there.
std::optional<double> stages_per_item_s(const nlohmann::json& report, std::initializer_list<const char*> names) {
  const auto& p = report.value("pipeline", nlohmann::json());
  if (!p.is_object() || !p.contains("stages") || !p["stages"].is_object()) return std::nullopt;
  double busy = 0;
  bool any = false;
  for (const char* stage : names) {
    const auto& st = p["stages"].value(stage, nlohmann::json());
    if (st.is_object() && st.value("per_item_ms", nlohmann::json()).is_number()) {
      busy += st["per_item_ms"].get<double>() / 1e3;
      any = true;
    }
  }
  return any ? std::optional<double>(busy) : std::nullopt;
}

const RunOutcome& need(const std::map<std::string, RunOutcome>& runs, const std::string& label) {
  auto it = runs.find(label);
  if (it == runs.end()) throw std::runtime_error("stall analysis: run '" + label + "' is missing");
  return it->second;
}

nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

nlohmann::json residency_json(const Residency& r) {
  return {{"fraction", r.fraction()}, {"pages", r.pages}, {"resident_pages", r.resident_pages}, {"files", r.files}};
}

double stall_pct_of(const RunOutcome& r) {
  const auto& s = r.report["stall"];
  return (s.is_object() && s["stall_pct"].is_number()) ? s["stall_pct"].get<double>() : std::nan("");
}

// One warning naming the runs whose pipeline skipped corrupt samples (their
// `pipeline.corrupt_samples`), or none: their rates count only the samples
// decoded, so the split and the what-if include runs on a smaller dataset.
std::vector<std::string> skipped_sample_warnings(const std::map<std::string, RunOutcome>& runs) {
  std::string listed;
  std::uint64_t total = 0;
  for (const auto& [label, r] : runs) {
    const nlohmann::json& p = r.report.contains("pipeline") ? r.report["pipeline"] : nlohmann::json();
    if (!p.is_object() || !p.contains("corrupt_samples") || !p["corrupt_samples"].is_number_unsigned()) continue;
    const auto n = p["corrupt_samples"].get<std::uint64_t>();
    if (n == 0) continue;
    total += n;
    listed += fmt::format("{}{} {}", listed.empty() ? "" : ", ", label, n);
  }
  if (total == 0) return {};
  return {
      fmt::format("{} corrupt sample(s) were skipped ({}); the split and the what-if include these runs, "
                  "whose rates count only the samples decoded (the runs' logs name the files)",
                  total, listed)};
}

// The share of the dataset's `items` that the item cache of a run's pipeline
// report held at its end; -1 when the report has no cache block. Not its hit
// count: that includes the first epoch, which fills the cache and only misses.
double item_cache_fraction(const RunOutcome& r, std::size_t items) {
  const nlohmann::json& p = r.report.contains("pipeline") ? r.report["pipeline"] : nlohmann::json();
  if (!p.is_object() || !p.contains("cache") || !p["cache"].is_object() || items == 0) return -1;
  const auto& c = p["cache"];
  if (!c.contains("items") || !c["items"].is_number()) return -1;
  return c["items"].get<double>() / static_cast<double>(items);
}

// The loader the runs measured, from the cached run's report: its workers,
// prefetch and --io-depth (absent: 0, workers that fetch and then prep each
// sample in turn), its prep CPUs (the workers, at most the CPUs the run had
// and its --cpu-cores), and the prep time per sample its stage timers saw.
struct MeasuredLoader {
  bool known = false;  // the report says how many workers built batches
  int io_depth = 0;
  int window = 1;  // reads each worker keeps ahead (pipeline.read_ahead.window_per_worker)
  LoaderShape shape;
  std::optional<double> prep_busy_s;
};

MeasuredLoader measured_loader(const RunOutcome& cached, int batch_size, int cores_now) {
  MeasuredLoader l;
  const nlohmann::json& p = cached.report.contains("pipeline") ? cached.report["pipeline"] : nlohmann::json();
  if (!p.is_object()) return l;
  if (p.contains("io_depth") && p["io_depth"].is_number_integer()) l.io_depth = p["io_depth"].get<int>();
  if (!p.contains("workers") || !p["workers"].is_number_integer() || p["workers"].get<int>() < 1) return l;
  l.known = true;
  l.shape.workers = p["workers"].get<int>();
  l.window = std::max(1, l.io_depth / l.shape.workers);
  if (const auto& ra = p.value("read_ahead", nlohmann::json());
      ra.is_object() && ra.value("window_per_worker", 0) > 0) {
    l.window = ra["window_per_worker"].get<int>();
  }
  l.shape.batch_size = std::max(1, batch_size);
  l.shape.prefetch = std::max(l.shape.workers, p.value("prefetch", 2 * l.shape.workers));
  int cpus = std::min(l.shape.workers, std::max(1, cores_now));
  if (cached.report.contains("cpu_cores") && cached.report["cpu_cores"].is_number_integer()) {
    cpus = std::min(cpus, std::max(1, cached.report["cpu_cores"].get<int>()));
  }
  l.shape.cpus = cpus;
  if (const auto busy = stages_per_item_s(cached.report, {"decode", "augment"})) l.prep_busy_s = *busy;
  return l;
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

// The mean CPU per sample of nodes [from, to) of a combined peer run; nullopt without it.
std::optional<double> mean_cpu_per_item_s(const RunOutcome& r, std::size_t from, std::size_t to) {
  double sum = 0;
  for (std::size_t i = from; i < to; ++i) {
    const auto c = cpu_per_item_s(r.nodes[i]);
    if (!c) return std::nullopt;
    sum += *c;
  }
  return to > from ? std::optional<double>(sum / static_cast<double>(to - from)) : std::nullopt;
}

// Nodes [from, to) of a combined peer run: their requests to peers and the items they took from
// peers, each per sample they loaded (pipeline.partitioned_cache.peer, pipeline.epochs[].images);
// nullopt where a report lacks them.
struct PeerTraffic {
  double requests = 0, items = 0;
};
std::optional<PeerTraffic> peer_traffic_per_sample(const RunOutcome& r, std::size_t from, std::size_t to) {
  double requests = 0, items = 0, samples = 0;
  for (std::size_t i = from; i < to && i < r.nodes.size(); ++i) {
    const auto& p = r.nodes[i].report.value("pipeline", nlohmann::json());
    if (!p.is_object() || !p.contains("partitioned_cache") || !p["partitioned_cache"].is_object()) return std::nullopt;
    const auto& peer = p["partitioned_cache"].value("peer", nlohmann::json());
    if (!peer.is_object() || !peer.value("requests", nlohmann::json()).is_number() || !p.contains("epochs")) {
      return std::nullopt;
    }
    requests += peer["requests"].get<double>();
    for (const char* f : {"cache_items", "storage_items", "misses"}) items += peer.value(f, 0.0);
    for (const auto& e : p["epochs"]) samples += e.value("images", 0.0);
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
    if (label.rfind("peer-", 0) == 0 && label != "peer-local" && !r.nodes.empty()) {
      part = &r;
      k.node_count = std::atoi(label.c_str() + 5);  // peer-N
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
  if (const auto& p = part->report.value("pipeline", nlohmann::json());
      p.is_object() && p.contains("partitioned_cache")) {
    const auto& pc = p["partitioned_cache"];
    if (pc.is_object() && pc.value("max_ids_per_request", 0) >= 1) k.max_ids_per_request = pc["max_ids_per_request"];
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
  nlohmann::json j = partitioned_whatif_json(nodes, {2, 4, 8});
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
    for (auto& pred : j["predictions"]) {
      PartitionedNodes in = nodes;
      in.nodes = pred["nodes"].get<int>();
      in.memory_fraction = pred["memory_fraction"].get<double>();
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

// The CPU a read takes from prep (the overlap model's term; issue 14), from the runs' own
// process CPU per sample, each term from runs in the regime it applies to:
// - a storage read's extra CPU: the system CPU per sample of the cold runs (`cold`, and
//   `cache-0.00` when measured: their mean) minus the cached run's, which read from the page
//   cache. The system part only: it is the read's own kernel work, steady from run to run
//   (real photographs at 70 MB/s: 38-62 us over 21 analyses), where the user part of a
//   fetch-bound run is mostly its own (workers that sleep on storage wake up to cold caches)
//   and moves with the host's speed (-46 to +50 us over the same 21);
// - what an item-cache hit saves against a page-cache read: the cached run's CPU per sample
//   minus that of `cache-1.00` (the whole dataset in the item cache), both prep-bound: it
//   anchors the item-cache curve at that measured end as the cold run anchors x = 0. It can be
//   negative: a hit's bytes come from memory the decoder has not touched, where a read has just
//   copied them through the CPU's caches. Without `cache-1.00`, the fetch-only run on warm
//   files (a page-cache read and nothing else).
// Spread over prep's `lanes` (the loader's workers, at most its CPUs): a read is on a
// worker's path. Zero (no term) when a report lacks them.
ReadCpu read_cpu_of(const std::map<std::string, RunOutcome>& runs, int lanes) {
  const auto sys_cached = cpu_per_item_s(need(runs, "cached"), true);
  const auto k_cached = cpu_per_item_s(need(runs, "cached"));
  const auto k_page = cpu_per_item_s(need(runs, "fetch-cached"));
  std::optional<double> sys_cold = cpu_per_item_s(need(runs, "cold"), true);
  if (auto it = runs.find("cache-0.00"); sys_cold && it != runs.end()) {
    if (const auto empty = cpu_per_item_s(it->second, true)) sys_cold = 0.5 * (*sys_cold + *empty);
  }
  if (!sys_cached || !k_cached || !sys_cold || !k_page || lanes < 1) return {};
  double saved = std::max(0.0, *k_page);
  if (auto it = runs.find("cache-1.00"); it != runs.end()) {
    if (const auto k_hits = cpu_per_item_s(it->second)) saved = *k_cached - *k_hits;
  }
  return {std::max(0.0, *sys_cold - *sys_cached), saved, static_cast<double>(lanes)};
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

}  // namespace

nlohmann::json analyze(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs, const RawRates& raw) {
  const RunOutcome& synthetic = need(runs, "synthetic");
  const RunOutcome& cached = need(runs, "cached");
  const RunOutcome& cold = need(runs, "cold");
  const RunOutcome& fetch_cold = need(runs, "fetch-cold");
  const RunOutcome& fetch_cached = need(runs, "fetch-cached");
  // G, the consumer's ceiling, is the synthetic run's speed; but every full run (cached, cold,
  // the CPU sweep's, the cache fractions') fed the same consumer, so G is at least the fastest of
  // them: a synthetic run below one met a slow moment of the host (stallsim's injected 500/s on a
  // loaded 2-core CI machine: synthetic 474 +-16%, cached 500.5 +-0%; the what-if then missed by 5.2%).
  // The CPU sweep's runs set --cpu-cores, so they fed the same consumer only where it does not
  // compute on those CPUs (on a device), or at the analysed run's own count: a ResNet-18 analysed
  // with --cpu-cores 1 computed on 2 CPUs in the sweep's cpus-2 run (264.7/s against its synthetic
  // 222.8), and G taken from that was 19% high in every convnet analysis of docs/performance.md.
  const bool compute_on_device = synthetic.report.value("device", "cpu") != "cpu";
  const int compute_cpus = synthetic.report.value("cpu_cores", 0);
  const auto same_consumer = [&](const std::string& label) {
    if (label == "cached" || label == "cold" || label.rfind("cache-", 0) == 0) return true;
    if (label.rfind("cpus-", 0) != 0) return false;
    return compute_on_device || std::atoi(label.c_str() + 5) == compute_cpus;
  };
  double G = synthetic.rate;
  std::string G_from = "synthetic";
  for (const auto& [label, r] : runs) {
    const bool full = same_consumer(label);
    if (full && r.rate > G) {
      G = r.rate;
      G_from = label;
    }
  }
  const double P = cached.rate, F_obs = cold.rate;
  const double S = fetch_cold.rate, C = fetch_cached.rate;

  const Split s = split(G, P, F_obs);
  // The noise of a rate, relative: that of the mean over its observations (sd / sqrt(n)), or with
  // --rounds the spread of its rounds where that is larger (docs/stall.md, "How sure").
  const auto se = [&](const std::string& label) {
    const RunOutcome& r = need(runs, label);
    const double u = r.cv / std::sqrt(static_cast<double>(std::max(1, r.observations)));
    const auto rounds = ctx.round_rates.find(label);
    if (rounds == ctx.round_rates.end() || rounds->second.size() < 2) return u;
    // The median of k rounds: one run's noise over sqrt(k), or the rounds' own spread if larger.
    const auto& rates = rounds->second;
    return std::max(u / std::sqrt(static_cast<double>(rates.size())), rounds_uncertainty(rates));
  };
  const double u_G = se(G_from), u_P = se("cached"), u_F = se("cold"), u_S = se("fetch-cold"), u_C = se("fetch-cached");
  const SplitNoise noise = split_noise(G, P, F_obs, u_G, u_P, u_F);

  std::map<int, double> p_by_cores;
  nlohmann::json sweep = nlohmann::json::object();
  for (const auto& [label, r] : runs) {
    if (label.rfind("cpus-", 0) == 0) {
      const int n = std::stoi(label.substr(5));
      p_by_cores[n] = r.rate;
      sweep[std::to_string(n)] = r.rate;
    }
  }
  if (p_by_cores.empty()) p_by_cores[ctx.cores_now] = P;

  // The model of the loader measured: with --io-depth 0 its workers fetch and
  // then prep each sample in turn (the serial model, simulated); with reads
  // issued ahead of decode, fetch overlaps prep (the overlap model, which
  // charges the fetch time the cold run did not hide to each miss). A report
  // that does not say how many workers built batches gets the overlap model.
  const MeasuredLoader loader = measured_loader(cached, ctx.batch_size, ctx.cores_now);
  const bool serial = loader.known && loader.io_depth == 0;
  // Reads issued ahead of decode: simulated too (stall/readahead_model.h); the overlap model's
  // min(F(x), P) is optimistic where fetch and prep are close.
  const bool reads_ahead = loader.known && loader.io_depth > 0;
  const bool simulated = serial || reads_ahead;
  // The overlap model's storage rate. The cold run read every item from
  // storage at F_obs, so storage sustains at least that with the reads the
  // pipeline keeps in flight; a fetch-only run that measured less kept fewer
  // (behind a blkio throttle, each request's own latency then adds to the
  // throttle's wait: 118/s fetch-only against 123/s in the cold run, and the
  // what-if 5.7% low at 75% cached). And when storage is the cold run's limit
  // (S below P and G) and the two agree within their noise, both measure the
  // same rate: pooled by their standard errors (a short fetch-only run behind
  // a throttle read 128/s, ±10%, the cold run 123/s, ±6%, and the 50% point
  // measured 240/s). The serial model calibrates S itself.
  const auto storage_for_model = [&](double st, double f, double p, double g) {
    if (serial) return st;
    const double var_s = std::pow(u_S * st, 2), var_f = std::pow(u_F * f, 2);
    const bool storage_bound = st < p && st < g;
    const bool agree = std::abs(st - f) <= 2 * std::sqrt(var_s + var_f);
    if (storage_bound && agree && var_s > 0 && var_f > 0) return (st / var_s + f / var_f) / (1 / var_s + 1 / var_f);
    return std::max(st, f);
  };
  // The CPU a read takes from prep: P(x) = 1 / (1/P + (reads' CPU beyond the cached run's) / prep's CPUs),
  // for a loader whose report says how many workers prepped.
  const ReadCpu read_cpu = serial || !loader.known ? ReadCpu{} : read_cpu_of(runs, loader.shape.cpus);
  // Storage's queue: a real device serves the reads in flight at once (S in aggregate), so a miss
  // after an idle spell does not wait 1/S; stallsim's emulated device serves one at a time.
  const nlohmann::json& cached_pipeline = cached.report.value("pipeline", nlohmann::json());
  const double storage_burst =
      cached_pipeline.is_object() && cached_pipeline.contains("emulated_storage") ? 0.0 : loader.io_depth;
  // The model at a set of rates: the measured ones, and each corner of their uncertainty, from
  // which every prediction gets its range (docs/stall.md, "How sure").
  struct Model {
    double G, P, F_obs, S, C, S_model = 0, exposed = 0;
    std::optional<SerialModel> sm;
    std::optional<ReadAheadModel> ra;
  };
  const auto build = [&](double g, double p, double f, double st, double c, int samples = 20000) {
    Model m{g, p, f, st, c, 0, 0, std::nullopt, std::nullopt};
    m.S_model = storage_for_model(st, f, p, g);
    // Fetch time the cold run's pipeline did not hide (workers that fetch and prep in turn);
    // the what-if charges it to every cache miss. The cold run's prep ran at P(0): every read
    // from storage.
    m.exposed = exposed_fetch_s(g, prep_rate(0.0, p, CacheKind::Page, read_cpu), m.S_model, f);
    if (serial) m.sm = calibrate_serial(loader.shape, g, p, st, c, loader.prep_busy_s, f);
    if (reads_ahead) {
      m.ra = calibrate_readahead(loader.shape, loader.window, g, p, m.S_model, c, loader.prep_busy_s, read_cpu, samples,
                                 storage_burst);
    }
    return m;
  };
  const auto predict_with = [&](const Model& m, double x, CacheKind cache) {
    if (m.ra) return readahead_speed(*m.ra, x, cache);
    return m.sm ? serial_speed(*m.sm, x, cache)
                : predicted_speed(x, m.P, m.G, m.C, m.S_model, m.exposed, cache, read_cpu);
  };
  const Model nominal = build(G, P, F_obs, S, C);
  const double S_model = nominal.S_model;
  const double exposed = nominal.exposed;
  const std::optional<SerialModel>& sm = nominal.sm;
  const auto predict = [&](double x, CacheKind cache) { return predict_with(nominal, x, cache); };
  // Uncached, with storage `factor` times faster (faster storage also shortens the exposed fetch).
  const auto storage_speed = [&](const Model& m, double factor) {
    if (m.ra) return readahead_speed_storage(*m.ra, factor);
    return m.sm
               ? serial_speed_storage(*m.sm, factor)
               : predicted_speed(0.0, m.P, m.G, m.C, m.S_model * factor, m.exposed / factor, CacheKind::Item, read_cpu);
  };
  // The corners: every rate at its measured value times (1 +- u). The serial model, a simulation
  // calibrated anew at each corner, takes the three rates it is calibrated on (P, S, F_obs).
  std::vector<Model> corners;
  {
    // Rates G, P, F_obs, S, C; only those with an uncertainty move.
    const std::array<double, 5> at{G, P, F_obs, S, C};
    const std::array<double, 5> rel{simulated ? 0.0 : u_G, u_P, u_F, u_S, simulated ? 0.0 : u_C};
    std::vector<std::size_t> axes;
    for (std::size_t i = 0; i < at.size(); ++i) {
      if (rel[i] > 0 && rel[i] < 1) axes.push_back(i);
    }
    for (unsigned mask = 0; !axes.empty() && mask < (1u << axes.size()); ++mask) {
      std::array<double, 5> v = at;
      for (std::size_t k = 0; k < axes.size(); ++k) v[axes[k]] *= 1 + ((mask >> k) & 1u ? rel[axes[k]] : -rel[axes[k]]);
      corners.push_back(build(v[0], v[1], v[2], v[3], v[4], 5000));
    }
  }
  // The range of a prediction over the corners (the measured rates' own value included).
  const auto range_of = [&](const auto& f) {
    double lo = f(nominal), hi = lo;
    for (const Model& m : corners) {
      const double v = f(m);
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    return std::pair<double, double>{lo, hi};
  };
  // The knee (fetch meets prep) and the recommendation: the smallest cache whose predicted speed
  // reaches kPlateauShare of the plateau. At the knee a prediction rests on F and P at once and
  // moves most with either; below it, on fetch alone (docs/stall.md, "The recommendation").
  const auto knee_of = [&](CacheKind cache) {
    if (nominal.ra) return std::optional<double>(cache_for_share([&](double x) { return predict(x, cache); }, 0.98));
    return sm ? std::optional<double>(serial_recommended_cache(*sm, cache))
              : recommended_cache(P, G, C, S_model, exposed, cache, read_cpu);
  };
  const auto knee = knee_of(CacheKind::Item);
  const auto page_knee = knee_of(CacheKind::Page);
  const auto plateau_point = [&](CacheKind cache, const std::optional<double>& k) -> std::optional<double> {
    if (!k) return std::nullopt;
    return cache_for_share([&](double x) { return predict(x, cache); }, kPlateauShare);
  };
  const auto cache_rec = plateau_point(CacheKind::Item, knee);
  const auto page_cache_rec = plateau_point(CacheKind::Page, page_knee);
  const double need_rate = std::min(fetch_rate(cache_rec.value_or(1.0), C, S_model), G);
  // At this machine's CPU count the sweep's run is the cached run's setting measured again; the
  // cache recommendation was made against P, so the CPU advice is too, or two measurements of one
  // setting that differ by their noise could say "more DRAM up to x" and "more CPUs beyond the
  // largest count" of the same balance point.
  std::map<int, double> p_for_advice = p_by_cores;
  p_for_advice[ctx.cores_now] = P;
  const auto cores_rec = recommended_cores(p_for_advice, need_rate * 0.98);  // 2%: within run-to-run noise

  std::vector<double> xs;
  for (int i = 0; i <= 20; ++i) xs.push_back(i / 20.0);
  nlohmann::json curve = nlohmann::json::array();
  nlohmann::json page_curve = nlohmann::json::array();
  const auto range_at = [&](double x, CacheKind cache) {
    return range_of([&](const Model& m) { return predict_with(m, x, cache); });
  };
  for (double x : xs) {
    const auto [lo, hi] = range_at(x, CacheKind::Item);
    const auto [page_lo, page_hi] = range_at(x, CacheKind::Page);
    curve.push_back({{"x", x},
                     {"fetch", fetch_rate(x, C, S_model)},
                     {"predicted", predict(x, CacheKind::Item)},
                     {"lo", lo},
                     {"hi", hi}});
    page_curve.push_back({{"x", x}, {"predicted", predict(x, CacheKind::Page)}, {"lo", page_lo}, {"hi", page_hi}});
  }
  double cache_full = std::numeric_limits<double>::quiet_NaN();
  if (auto it = runs.find("cache-1.00"); it != runs.end()) cache_full = it->second.rate;
  std::vector<std::string> warnings = consistency_warnings(P, F_obs, cache_full);
  if (G > 1.01 * synthetic.rate) {
    warnings.push_back(fmt::format(
        "the synthetic run ({:.1f} samples/s) was slower than the {} run ({:.1f}), which fed the same consumer: G "
        "is taken as {:.1f} (a slow moment of the host in the synthetic run)",
        synthetic.rate, G_from, G, G));
  }
  for (std::string& w : skipped_sample_warnings(runs)) warnings.push_back(std::move(w));
  nlohmann::json measured = nlohmann::json::array();
  double max_err = 0, sum_err = 0;
  std::vector<CheckPoint> check_points;
  nlohmann::json page_measured = nlohmann::json::array();
  for (const auto& [label, r] : runs) {
    // cache-X: X of the dataset in the item cache; page-X: X resident in the page cache, held
    // there with --hold-page-cache (plan_runs' page-cache check).
    const bool item = label.rfind("cache-", 0) == 0, page = label.rfind("page-", 0) == 0;
    if (!item && !page) continue;
    const double x = std::stod(label.substr(item ? 6 : 5));
    const CacheKind cache = item ? CacheKind::Item : CacheKind::Page;
    const double pred = predict(x, cache);
    const auto [lo, hi] = range_at(x, cache);
    const double err = 100 * relative_error(pred, r.rate);
    const nlohmann::json point = {{"x", x},   {"measured", r.rate}, {"predicted", pred},
                                  {"lo", lo}, {"hi", hi},           {"error_pct", err}};
    if (item) {
      max_err = std::max(max_err, err);
      sum_err += err;
      measured.push_back(point);
    } else {
      page_measured.push_back(point);
    }
    CheckPoint c{x,
                 r.rate,
                 pred,
                 fetch_rate(x, C, S_model),
                 item ? item_cache_fraction(r, ctx.items) : -1.0,
                 item && r.after.pages ? r.after.fraction() : -1.0};
    c.lo = lo;
    c.hi = hi;
    c.cache = cache;
    check_points.push_back(c);
  }
  const SelfCheck check = self_check(check_points, P, G, kSelfCheckThresholdPct, simulated, reads_ahead);
  // A curve that misses the measured speed beyond its range recommends nothing: the cache
  // fraction comes from it, and the CPU count from the speed it promises.
  const bool withheld = !check.passed;
  nlohmann::json check_json = nlohmann::json::array();
  for (const CheckPoint& p : check.points) {
    check_json.push_back(
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

  nlohmann::json storage_whatif = nlohmann::json::array();
  for (double factor : {0.5, 2.0, 4.0, 10.0}) {
    storage_whatif.push_back(
        {{"S_factor", factor}, {"S", S_model * factor}, {"speed_uncached", storage_speed(nominal, factor)}});
  }

  const double direct_cold = stall_pct_of(cold);
  nlohmann::json run_json = nlohmann::json::object();
  for (const auto& [label, r] : runs) {
    run_json[label] = {{"rate", r.rate},
                       {"rate_from", r.rate_from.empty() ? "mean" : r.rate_from},
                       {"cv", r.cv},
                       {"wall_s", r.wall_s},
                       {"residency_before", residency_json(r.before)},
                       {"residency_after", residency_json(r.after)},
                       {"held_in_memory", r.held},
                       {"stall_pct", num(stall_pct_of(r))},
                       {"pipeline", r.report.value("pipeline", nlohmann::json())},
                       {"report", r.report_path.string()},
                       {"log", r.log_path.string()}};
    if (!r.nodes.empty()) {
      const auto cpu_us = [](const RunOutcome& o) {
        const auto s = cpu_per_item_s(o);
        return s ? nlohmann::json(1e6 * *s) : nlohmann::json();
      };
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
  }
  // Coordinated prep (issue 18): K jobs of this one, with and without --coordinated K.
  const nlohmann::json& cp = cached.report.value("pipeline", nlohmann::json());
  const double side = cp.is_object() ? cp.value("image_size", 0.0) : 0.0;
  const double sample_bytes = 3 * side * side * (cp.is_object() && cp.value("output", "") == "uint8" ? 1 : 4);
  const bool own_device = cached.report.value("device", "cpu") != "cpu";
  // On a device the K jobs share this machine's GPUs (at least the one the runs used), and each
  // pays the host CPU the synthetic run's process took per sample (launches, the wait).
  DeviceHost device_host;
  const auto alone = cpu_per_item_s(synthetic);
  if (own_device) {
    const auto& machine = synthetic.report.value("machine", nlohmann::json());
    const auto& gpus = machine.is_object() ? machine.value("gpus", nlohmann::json()) : nlohmann::json();
    device_host.devices = std::max<int>(1, gpus.is_array() ? static_cast<int>(gpus.size()) : 0);
    device_host.host_cpu_s = alone.value_or(0.0);
  }
  // K synthetic runs at once (plan_shared_device_runs), where made: on a device, what each of K
  // jobs got of it; on a CPU, where K jobs' steps at once, each on CPUs of its own, slow each other
  // (caches, memory bandwidth), what each paid per sample beyond one alone.
  JobsSharing sharing;
  for (int k : kCoordinatedJobs) {
    const auto it = runs.find(fmt::format("synthetic-x{}", k));
    if (it == runs.end()) continue;
    if (own_device) {
      if (it->second.rate > 0) sharing.device_rate[k] = it->second.rate;
    } else if (alone && !it->second.nodes.empty()) {
      if (const auto each = mean_cpu_per_item_s(it->second, 0, it->second.nodes.size())) {
        sharing.step_cpu_extra_s[k] = *each - *alone;
      }
    }
  }
  const CoordinatedJobs coordinated = coordinated_inputs(
      ctx.cores_now, p_by_cores.count(1) ? p_by_cores.at(1) : 0.0, P, loader.known ? loader.shape.cpus : ctx.cores_now,
      G, own_device, sample_bytes, raw.cached.mb_per_s * 1e6, loader.known ? loader.shape.workers : 0,
      synthetic.report.value("cpu_cores", 0),
      stages_per_item_s(cached.report, {"fetch", "decode", "augment", "collate"}).value_or(0.0), device_host);
  // The remedies the what-if predicts, ranked by gain (issue 18): the item cache and,
  // with compute on a device of its own, twice the CPUs from this curve (none when it
  // failed its self-check); coordinated prep for 2 jobs from its own model.
  std::vector<Remedy> candidates;
  // A remedy's gain over the corners of the rates' uncertainty, `to` and `from` at each.
  const auto with_range = [&](Remedy r, const auto& to, const auto& from) {
    std::tie(r.gain_lo, r.gain_hi) = range_of([&](const Model& m) { return to(m) / from(m); });
    return r;
  };
  const auto uncached_at = [&](const Model& m) { return predict_with(m, 0.0, CacheKind::Item); };
  if (!withheld && !ctx.exec) {
    const double x = cache_rec.value_or(1.0);
    candidates.push_back(with_range(
        {"item cache",
         cache_rec ? fmt::format("{:.0f}% of the dataset in the item cache (--cache-size)", 100 * *cache_rec)
                   : std::string("the whole dataset in the item cache (memory reads still limit it)"),
         predict(0.0, CacheKind::Item), predict(x, CacheKind::Item), Bound::Fetch},
        [&](const Model& m) { return predict_with(m, x, CacheKind::Item); }, uncached_at));
    if (own_device && !sm) {
      ReadCpu twice = read_cpu;  // the reads' CPU, too, spread over twice the CPUs
      twice.cpus *= 2;
      // Prep scaled linearly: the read-ahead loader with twice the workers on twice the CPUs.
      const auto doubled = [&](const Model& m) {
        if (m.ra) {
          ReadAheadModel more = *m.ra;
          more.shape.workers *= 2;
          more.shape.cpus *= 2;
          more.shape.prefetch *= 2;  // the loader's default prefetch grows with its workers
          return readahead_speed(more, 0.0, CacheKind::Item);
        }
        return predicted_speed(0.0, 2 * m.P, m.G, m.C, m.S_model, m.exposed, CacheKind::Item, twice);
      };
      candidates.push_back(with_range(
          {"more CPUs",
           fmt::format("{} CPUs instead of {}, prep scaled linearly, no cache", 2 * ctx.cores_now, ctx.cores_now),
           predict(0.0, CacheKind::Item), doubled(nominal), Bound::Prep},
          doubled, uncached_at));
    }
  }
  // Under --exec, remedies the script can apply (docs/stall.md, "Advice in your script's terms"):
  // RAM for the OS page cache, a copy of the dataset on faster storage, more CPUs for the
  // DataLoader's workers. mlbench's own flags are not the script's.
  std::vector<std::pair<Bound, std::string>> exec_notes;  // each for a stall of its kind (Compute: any)
  if (!withheld && ctx.exec) {
    const double gb = ctx.dataset_bytes / 1e9;
    if (page_cache_rec && *page_cache_rec > 0) {
      const double x = *page_cache_rec;
      const auto page_at = [&](const Model& m) { return predict_with(m, x, CacheKind::Page); };
      const auto page_cold = [&](const Model& m) { return predict_with(m, 0.0, CacheKind::Page); };
      candidates.push_back(with_range(
          {"OS page cache",
           gb > 0 ? fmt::format("{:.1f} GB of RAM free for the OS page cache, {:.0f}% of the dataset's {:.1f} GB "
                                "(preload it with `vmtouch -t {}` or `cat` the files once)",
                                x * gb, 100 * x, gb, ctx.config.data)
                  : fmt::format("{:.0f}% of the dataset in the OS page cache (RAM)", 100 * x),
           page_cold(nominal), page_at(nominal), Bound::Fetch},
          page_at, page_cold));
    }
    // Faster storage: the smallest speed-up of S whose uncached speed reaches the plateau's share.
    const double best = storage_speed(nominal, 1000.0);
    if (best > 1.02 * storage_speed(nominal, 1.0)) {
      double lo = 1.0, hi = 1000.0;
      for (int i = 0; i < 40; ++i) {
        const double mid = std::sqrt(lo * hi);
        (storage_speed(nominal, mid) >= kPlateauShare * best ? hi : lo) = mid;
      }
      const double mb_s = S_model * hi * raw.mean_file_bytes / 1e6;
      candidates.push_back(with_range(
          {"faster storage",
           fmt::format("a copy of the dataset on storage serving {:.0f} samples/s{} (now {:.0f}/s)", S_model * hi,
                       raw.mean_file_bytes > 0 ? fmt::format(", {:.0f} MB/s of random reads of its files", mb_s) : "",
                       S_model),
           storage_speed(nominal, 1.0), storage_speed(nominal, hi), Bound::Fetch},
          [&](const Model& m) { return storage_speed(m, hi); }, [&](const Model& m) { return storage_speed(m, 1.0); }));
    }
    // More CPUs: a count the sweep measured whose prep keeps up, with as many workers.
    const int workers = loader.known ? loader.shape.workers : cached.report.value("workers", 0);
    if (cores_rec && *cores_rec > ctx.cores_now) {
      const double p_new = p_for_advice.at(*cores_rec);
      const auto more = [&](const Model& m) {
        return predicted_speed(0.0, p_new * m.P / P, m.G, m.C, m.S_model, m.exposed, CacheKind::Page, read_cpu);
      };
      candidates.push_back(with_range(
          {"more CPUs",
           fmt::format("{} CPUs for the script, DataLoader(num_workers={}) (measured: prep {:.0f} samples/s on {})",
                       *cores_rec, std::max(workers, *cores_rec), p_new, *cores_rec),
           uncached_at(nominal), more(nominal), Bound::Prep},
          more, uncached_at));
    } else if (workers < ctx.cores_now) {
      exec_notes.emplace_back(Bound::Prep, fmt::format("DataLoader(num_workers={}) on {} CPUs: num_workers={} uses "
                                                       "them all (not measured)",
                                                       workers, ctx.cores_now, ctx.cores_now));
    }
    const auto& pl = cached.report.value("pipeline", nlohmann::json());
    if (cached.report.value("device", "cpu") != "cpu" && pl.is_object() && pl.value("pin_memory", true) == false) {
      exec_notes.emplace_back(
          Bound::Compute, "DataLoader(pin_memory=True): the copies to the GPU then overlap the step (not measured)");
    }
    if (const auto it = runs.find("mlbench-loader"); it != runs.end() && it->second.rate > 0) {
      const auto& lp = it->second.report.value("pipeline", nlohmann::json());
      exec_notes.emplace_back(
          Bound::Compute,
          fmt::format("an alternative to the script's loader: mlbench's own prepared {:.0f} samples/s from these files "
                      "on this machine ({} workers{}), against the script's {:.0f} with the data cached (measured: "
                      "run mlbench-loader)",
                      it->second.rate, lp.is_object() ? lp.value("workers", 0) : 0,
                      lp.is_object() && lp.value("image_size", 0) > 0
                          ? fmt::format(", {} px crops", lp["image_size"].get<int>())
                          : std::string(),
                      P));
    } else {
      exec_notes.emplace_back(Bound::Compute, fmt::format("an alternative to the script's loader: mlbench's own "
                                                          "(`mlbench-stall --bench loader --data {}` measures what it "
                                                          "reaches on this machine)",
                                                          ctx.config.data));
    }
  }
  // Partitioned cache (issue 18): N nodes like this one (or sharing its CPUs), each caching 1/N
  // (--node-cache), their misses on one storage of rate S, peers at the loopback rate measured.
  PartitionedNodes nodes;
  nodes.prep_rate = P;
  nodes.device_rate = G;
  nodes.memory_rate = C;
  nodes.storage_rate = S_model;
  nodes.peer_rate = raw.peer_rate > 0 ? raw.peer_rate : std::numeric_limits<double>::infinity();
  nodes.memory_fraction = ctx.config.node_cache;
  nodes.shared_cpus = ctx.config.nodes_share_cpus;
  // The CPU budget: this machine's CPUs (each node's, or shared by the N), a sample's prep from
  // the one-CPU run, a peer fetch's CPU (both ends) from the loopback measurement.
  nodes.cores = ctx.cores_now;
  nodes.prep_cpu_s = p_by_cores.count(1) && p_by_cores.at(1) > 0 ? 1.0 / p_by_cores.at(1) : 0.0;
  // A peer request's CPU as nodes pay it, beside their decoding: the peer runs' CPU per sample,
  // N nodes with 1/N each and peers against N nodes with the whole dataset each, over the
  // requests to peers they made a sample. The back-to-back loopback figure otherwise.
  const PeerCpu peer_cpu = peer_cpu_of(runs, raw, ctx.batch_size);
  nodes.peer_request_cpu_s = peer_cpu.used_s;
  nodes.batch_items = peer_cpu.batch_items;
  nodes.max_ids_per_request = peer_cpu.max_ids_per_request;
  // And a sample's CPU as nodes pay it: the peer-local runs' (N nodes at once on these CPUs,
  // every item from their item caches, three runs), where they were made. One `cpus-1` run
  // can be a slow moment of the host (285 us a sample against the nodes' 234, seconds apart).
  std::string prep_cpu_from = nodes.prep_cpu_s > 0 ? "cpus-1" : "none";
  if (peer_cpu.local_item_s && *peer_cpu.local_item_s > 0) {
    nodes.prep_cpu_s = *peer_cpu.local_item_s;
    prep_cpu_from = "peer-local";
  }
  // P, a node's prep ceiling (its workers'), is one `cached` run; the peer-local nodes, each with
  // the same flags and a share of the CPUs, reached their speed: the ceiling is at least that
  // (a `cached` run below it met a slow moment of the host: 3,563 against the nodes' 4,384).
  std::string prep_rate_from = "cached";
  if (const auto local = runs.find("peer-local"); local != runs.end() && local->second.rate > nodes.prep_rate) {
    nodes.prep_rate = local->second.rate;
    prep_rate_from = "peer-local";
  }
  const bool partitioned_known = raw.peer_rate > 0;
  if (!withheld && partitioned_known && !ctx.exec) {
    PartitionedNodes two = nodes;
    two.nodes = 2;
    if (two.memory_fraction <= 0) two.memory_fraction = 0.5;
    const PartitionedPrediction pp = predict_partitioned(two);
    candidates.push_back(
        {"partitioned cache",
         fmt::format("2 nodes{}, each caching {:.0f}% of the dataset, partitioned (--peers), per node",
                     two.shared_cpus ? " on this machine" : " like this one", 100 * two.memory_fraction),
         pp.own, pp.partitioned, Bound::Fetch});
  }
  if (!ctx.exec) {
    const CoordinatedPrediction cp2 = predict_coordinated(for_jobs(coordinated, 2, sharing));
    candidates.push_back({"coordinated prep", "2 jobs on this machine under --coordinated 2, per job",
                          cp2.uncoordinated, cp2.coordinated, Bound::Prep});
  }
  // Which shares are stalls, the bound, the verdict and the remedy: one judgement (stall/decision.h).
  const StallShare fetch = fetch_share(s, noise, F_obs, S_model);
  const StallShare prep = prep_share(s, noise, G, P, F_obs);
  const Decision decision = decide({s, fetch, prep, cache_rec, cores_rec, ctx.cores_now, candidates});
  Verdict plain{decision.bound, decision.verdict};
  if (fetch.claimed() && cache_rec && *cache_rec > 0.0 && page_cache_rec && !ctx.exec) {
    plain.text += fmt::format(
        " (the cache is mlbench's item cache, --cache-size; in the OS page cache instead: {:.0f}% "
        "cached)",
        100 * *page_cache_rec);
  }
  const Verdict v = checked_verdict(plain, check);
  const std::vector<Remedy>& remedies = decision.ranked;
  const std::optional<Remedy>& best = decision.remedy;
  const auto remedy_json = [](const Remedy& r) {
    return nlohmann::json{{"name", r.name},
                          {"detail", r.detail},
                          {"from", r.from},
                          {"to", r.to},
                          {"gain", r.gain()},
                          {"gain_range", {r.low(), r.high()}},
                          {"stall", r.stall == Bound::Fetch ? "fetch" : "prep"}};
  };
  nlohmann::json remedies_json = nlohmann::json::array();
  for (const Remedy& r : remedies) remedies_json.push_back(remedy_json(r));
  const auto share_json = [](const StallShare& sh) {
    return nlohmann::json{{"pct", sh.pct},
                          {"noise_pp", sh.noise_pp},
                          {"max_pct", sh.max_pct},
                          {"effective_pct", sh.effective()},
                          {"possible", sh.possible()},
                          {"claimed", sh.claimed()},
                          {"text", share_text(sh)}};
  };
  // Beyond the remedy named, what the user can do that needs no prediction (under --exec).
  nlohmann::json advice = nlohmann::json::array();
  for (const auto& [stall, note] : exec_notes) {
    const bool any = fetch.claimed() || prep.claimed();
    if (stall == Bound::Prep ? prep.claimed() : any) advice.push_back(note);
  }
  const auto rec_range = cache_rec ? range_at(*cache_rec, CacheKind::Item) : std::pair<double, double>{0, 0};
  const double mb = raw.mean_file_bytes / 1e6;
  return {
      // 2: the what-if names its model (serial or overlap) and predicts for the page cache too (issue 14).
      {"schema_version", kStallSchemaVersion},
      {"bench", ctx.config.bench},
      {"data", ctx.config.data},
      {"items", ctx.items},
      {"batch_size", ctx.batch_size},
      {"cores", ctx.cores_now},
      {"iterations", ctx.config.iterations},
      {"rates",
       {{"G", G}, {"P", P}, {"F_obs", F_obs}, {"C", C}, {"S", S}, {"S_model", S_model}, {"unit", "samples/s"}}},
      {"storage",
       {{"seq_cold_MBps", raw.seq_cold.mb_per_s},
        {"rand_cold_MBps", raw.rand_cold.mb_per_s},
        {"cached_MBps", raw.cached.mb_per_s},
        {"mean_file_bytes", raw.mean_file_bytes},
        {"peer_rate", raw.peer_rate > 0 ? nlohmann::json(raw.peer_rate) : nlohmann::json()},
        {"peer_cpu_us", raw.peer_rate > 0 ? nlohmann::json(1e6 * raw.peer_cpu_s) : nlohmann::json()},
        {"peer_ids_per_request", raw.peer_rate > 0 ? nlohmann::json(raw.peer_ids_per_request) : nlohmann::json()},
        {"S_raw", mb > 0 ? num(raw.rand_cold.mb_per_s / mb) : nlohmann::json()},
        {"C_raw", mb > 0 ? num(raw.cached.mb_per_s / mb) : nlohmann::json()},
        {"unit_raw", "samples/s from whole-file reads"}}},
      {"split", {{"compute_pct", s.compute_pct}, {"prep_pct", s.prep_pct}, {"fetch_pct", s.fetch_pct}}},
      {"split_raw", {{"compute_pct", s.raw_compute_pct}, {"prep_pct", s.raw_prep_pct}, {"fetch_pct", s.raw_fetch_pct}}},
      {"noise_pp", {{"compute", noise.compute_pp}, {"prep", noise.prep_pp}, {"fetch", noise.fetch_pp}}},
      {"cv", {{"G", synthetic.cv}, {"P", cached.cv}, {"F_obs", cold.cv}, {"C", fetch_cached.cv}, {"S", fetch_cold.cv}}},
      {"direct",
       {{"stall_pct_cold", num(direct_cold)},
        {"stall_pct_cached", num(stall_pct_of(cached))},
        {"differential_stall_pct", s.prep_pct + s.fetch_pct},
        {"disagreement_pp", num(std::abs(direct_cold - (s.prep_pct + s.fetch_pct)))},
        {"note", std::isfinite(direct_cold)
                     ? disagreement_note(direct_cold, s.prep_pct + s.fetch_pct, std::max(noise.prep_pp, noise.fetch_pp))
                     : std::string()}}},
      {"prep_by_cores", sweep},
      {"findings", {{"fetch", share_json(fetch)}, {"prep", share_json(prep)}, {"sigmas", kSignificanceSigmas}}},
      {"recommendation",
       {{"cache_fraction", cache_rec && !withheld && fetch.claimed() ? nlohmann::json(*cache_rec) : nlohmann::json()},
        {"knee_fraction", knee && !withheld ? nlohmann::json(*knee) : nlohmann::json()},
        {"plateau_share", kPlateauShare},
        {"predicted", cache_rec && !withheld ? nlohmann::json(predict(*cache_rec, CacheKind::Item)) : nlohmann::json()},
        {"predicted_range",
         cache_rec && !withheld ? nlohmann::json{rec_range.first, rec_range.second} : nlohmann::json()},
        {"advice", advice},
        {"cache", "item cache"},
        {"page_cache_fraction",
         page_cache_rec && !withheld && fetch.claimed() ? nlohmann::json(*page_cache_rec) : nlohmann::json()},
        {"cores", cores_rec && !withheld ? nlohmann::json(*cores_rec) : nlohmann::json()},
        {"withheld", withheld},
        {"bound", to_string(v.bound)},
        {"verdict", v.text},
        {"remedy", best ? remedy_json(*best) : nlohmann::json()},
        {"remedies", remedies_json},
        {"not_named", decision.not_named},
        {"remedy_text", decision.remedy_text}}},
      {"self_check",
       {{"passed", check.ran ? nlohmann::json(check.passed) : nlohmann::json()},
        {"max_error_pct", check.ran ? nlohmann::json(check.max_error_pct) : nlohmann::json()},
        {"threshold_pct", check.threshold_pct},
        {"points", check_json},
        {"cause", check.cause.empty() ? nlohmann::json() : nlohmann::json(check.cause)},
        {"text", check.text}}},
      {"whatif",
       {{"model", serial        ? "serial"
                  : reads_ahead ? "read-ahead"
                                : "overlap"},
        {"model_formula",
         reads_ahead ? readahead_formula(loader.window) : whatif_formula(serial, exposed, read_cpu.active())},
        {"cache", "item cache"},
        {"io_depth", loader.io_depth},
        {"loader", loader.known ? nlohmann::json{{"workers", loader.shape.workers},
                                                 {"prep_cpus", loader.shape.cpus},
                                                 {"batch_size", loader.shape.batch_size},
                                                 {"prefetch", loader.shape.prefetch}}
                                : nlohmann::json()},
        {"serial", sm ? serial_json(*sm, F_obs) : nlohmann::json()},
        {"read_ahead", nominal.ra ? readahead_json(*nominal.ra, F_obs) : nlohmann::json()},
        {"page_cache",
         {{"cache", "page cache"},
          {"hit_us", sm           ? nlohmann::json(1e6 * sm->page_hit_s)
                     : nominal.ra ? nlohmann::json(1e6 * nominal.ra->page_hit_s)
                                  : nlohmann::json(1e6 / C)},
          {"recommended_fraction", page_cache_rec && !withheld ? nlohmann::json(*page_cache_rec) : nlohmann::json()},
          {"knee_fraction", page_knee && !withheld ? nlohmann::json(*page_knee) : nlohmann::json()},
          {"curve", page_curve},
          {"measured", page_measured}}},
        {"uncertainty",
         {{"G", u_G},
          {"P", u_P},
          {"F_obs", u_F},
          {"S", u_S},
          {"C", u_C},
          {"from", ctx.round_rates.empty() ? "each run's observations (sd / sqrt(n))"
                                           : "each run's observations or the spread of its rounds, the larger"}}},
        {"curve", curve},
        {"measured", measured},
        {"exposed_fetch_us", 1e6 * exposed},
        {"read_cpu", read_cpu.active() ? nlohmann::json{{"storage_extra_us", 1e6 * read_cpu.storage_extra_s},
                                                        {"page_read_us", 1e6 * read_cpu.page_read_s},
                                                        {"cpus", read_cpu.cpus}}
                                       : nlohmann::json()},
        {"max_error_pct", measured.empty() ? nlohmann::json() : nlohmann::json(max_err)},
        {"mean_error_pct", measured.empty() ? nlohmann::json() : nlohmann::json(sum_err / measured.size())},
        {"storage", storage_whatif},
        {"coordinated", coordinated_whatif_json(coordinated, kCoordinatedJobs, sharing)},
        {"partitioned",
         partitioned_known ? partitioned_json(nodes, peer_cpu, prep_cpu_from, prep_rate_from) : nlohmann::json()}}},
      {"warnings", warnings},
      {"runs", run_json},
  };
}

std::string console_summary(const nlohmann::json& r) {
  std::string out;
  const auto& rates = r["rates"];
  out += fmt::format("{:<28}{:>12}\n", "rate (samples/s)", "value");
  out += fmt::format("{:<28}{:>12.1f}\n", "G  ingestion (synthetic)", rates["G"].get<double>());
  out += fmt::format("{:<28}{:>12.1f}\n", "P  prep (dataset cached)", rates["P"].get<double>());
  out += fmt::format("{:<28}{:>12.1f}\n", "F  observed (cold)", rates["F_obs"].get<double>());
  out += fmt::format("{:<28}{:>12.1f}\n", "C  fetch from memory", rates["C"].get<double>());
  out += fmt::format("{:<28}{:>12.1f}\n", "S  fetch from storage", rates["S"].get<double>());
  if (rates.contains("S_model") && rates["S_model"].get<double>() != rates["S"].get<double>()) {
    const bool at_least = rates["S_model"].get<double>() == rates["F_obs"].get<double>();
    out += fmt::format("{:<28}{:>12.1f}  ({})\n", "S  for the what-if", rates["S_model"].get<double>(),
                       at_least ? "the cold run's F: storage gave the pipeline at least that"
                                : "S and the cold run's F, pooled: both measured the storage the cold run waited on");
  }
  if (r.contains("rounds") && r["rounds"].is_object()) {
    std::string widest;
    double spread = -1;
    const auto& runs = r["rounds"]["runs"];
    for (const auto& [label, v] : runs.items()) {
      if (v["spread_pct"].get<double>() > spread) {
        spread = v["spread_pct"].get<double>();
        widest = label;
      }
    }
    const std::string p_spread =
        runs.contains("cached") ? fmt::format("P's runs spread {:.1f}%; ", runs["cached"]["spread_pct"].get<double>())
                                : "";
    out += fmt::format("rounds: {} (each rate from the median of its run's rounds; {}widest spread {:.1f}%, {})\n",
                       r["rounds"]["count"].get<int>(), p_spread, spread, widest);
  }
  const auto& s = r["split"];
  const auto& n = r["noise_pp"];
  out += fmt::format(
      "\nsplit of cold epoch time: compute {:.1f}% (±{:.1f}), prep stall {:.1f}% (±{:.1f}), fetch stall "
      "{:.1f}% (±{:.1f})\n",
      s["compute_pct"].get<double>(), n["compute"].get<double>(), s["prep_pct"].get<double>(), n["prep"].get<double>(),
      s["fetch_pct"].get<double>(), n["fetch"].get<double>());
  // Which shares are stalls (larger than twice their noise, possible at the rates measured).
  if (const auto& f = r.value("findings", nlohmann::json()); f.is_object()) {
    for (const char* k : {"fetch", "prep"}) {
      if (f.contains(k) && !f[k].value("claimed", false)) out += "  " + f[k]["text"].get<std::string>() + "\n";
    }
  }
  const auto& d = r["direct"];
  if (d["stall_pct_cold"].is_number()) {
    out += fmt::format(
        "direct instrumentation (cold run): {:.1f}% of iteration time waiting for data; differential: "
        "{:.1f}% (disagreement {:.1f} pp)\n",
        d["stall_pct_cold"].get<double>(), d["differential_stall_pct"].get<double>(),
        d["disagreement_pp"].get<double>());
    if (const std::string note = d.value("note", std::string()); !note.empty()) out += "  " + note + "\n";
  }
  if (!r["prep_by_cores"].empty()) {
    out += "prep rate by CPUs:";
    for (const auto& [k, v] : r["prep_by_cores"].items()) out += fmt::format(" {}: {:.1f}", k, v.get<double>());
    out += "\n";
  }
  if (const auto& e = r["whatif"]["exposed_fetch_us"];
      r["whatif"].value("model", std::string("overlap")) == "overlap" && e.is_number() && e.get<double>() > 0) {
    out += fmt::format(
        "fetch not hidden by the pipeline (cold run): {:.1f} us per sample, {:.0f}% of its time; "
        "the what-if charges it to each cache miss\n",
        e.get<double>(), 1e-4 * e.get<double>() * r["rates"]["F_obs"].get<double>());
  }
  // A measured point against its prediction and the prediction's range over the rates' noise.
  const auto point_line = [](const nlohmann::json& m, const char* cache) {
    const std::string range = m.contains("lo") && m["hi"].get<double>() > m["lo"].get<double>()
                                  ? fmt::format(" [{:.1f}-{:.1f}]", m["lo"].get<double>(), m["hi"].get<double>())
                                  : std::string();
    return fmt::format("{} {:>5.1f}%: measured {:.1f}/s, predicted {:.1f}/s{} ({:.1f}% off)\n", cache,
                       100 * m["x"].get<double>(), m["measured"].get<double>(), m["predicted"].get<double>(), range,
                       m["error_pct"].get<double>());
  };
  for (const auto& m : r["whatif"]["measured"]) out += point_line(m, "cache");
  if (const auto& pc = r["whatif"].value("page_cache", nlohmann::json()); pc.is_object() && pc.contains("measured")) {
    for (const auto& m : pc["measured"]) out += point_line(m, "page cache");
  }
  if (const auto& u = r["whatif"].value("uncertainty", nlohmann::json()); u.is_object()) {
    out += fmt::format(
        "ranges: each prediction over its rates' uncertainty (G ±{:.1f}%, P ±{:.1f}%, F ±{:.1f}%, S "
        "±{:.1f}%), from {}{}\n",
        100 * u["G"].get<double>(), 100 * u["P"].get<double>(), 100 * u["F_obs"].get<double>(),
        100 * u["S"].get<double>(), u["from"].get<std::string>(),
        r.contains("rounds") ? "" : "; one run per state cannot see drift between runs: --rounds 3 can");
  }
  if (const auto& w = r["whatif"]; w.contains("model")) {
    out += fmt::format("what-if model: {} ({}), for the {}\n", w["model"].get<std::string>(),
                       w.value("model_formula", std::string()), w.value("cache", std::string()));
  }
  if (const auto& rj = r["whatif"].value("read_ahead", nlohmann::json()); rj.is_object()) {
    out += fmt::format(
        "read-ahead model: {} read(s) ahead per worker, prep {:.0f} us per sample, storage {:.0f} us, "
        "a miss's CPU {:.0f} us; predicts the cold run at {:.1f}/s ({:.1f}% off)\n",
        rj["window"].get<int>(), rj["prep_us"].get<double>(), rj["storage_us"].get<double>(),
        rj["miss_us"].get<double>(), rj["predicted_cold"].get<double>(), rj["cold_error_pct"].get<double>());
  }
  if (const auto& sj = r["whatif"].value("serial", nlohmann::json()); sj.is_object()) {
    out += fmt::format(
        "serial model: prep {:.0f} us per sample, storage {:.0f} us, page-cache hit {:.0f} us; "
        "predicts the cold run at {:.1f}/s ({:.1f}% off)\n",
        sj["prep_us"].get<double>(), sj["storage_us"].get<double>(), sj["page_hit_us"].get<double>(),
        sj["predicted_cold"].get<double>(), sj["cold_error_pct"].get<double>());
  }
  // Under --exec, mlbench's own remedies (coordinated prep, a partitioned cache) are not the
  // script's: stall.json keeps their models, the console does not offer them.
  const bool exec = r.value("bench", std::string()) == "exec";
  if (const auto& cj = r["whatif"].value("coordinated", nlohmann::json()); cj.is_object() && !exec) {
    out += "coordinated prep (per job, samples/s):";
    for (const auto& k : cj["predictions"]) {
      out += fmt::format(" {} jobs {:.1f} -> {:.1f} (x{:.2f});", k["jobs"].get<int>(), k["uncoordinated"].get<double>(),
                         k["coordinated"].get<double>(), k["gain"].get<double>());
    }
    out += "\n";
    // Where its p came from: what a group shares (prep) and what every job pays (the step).
    const std::string from = cj.value("prep_cpu_from", "cpus-1");
    out +=
        fmt::format("  a sample's prep CPU (p, shared by a group): {:.0f} us, {}; the step's (every job): {:.0f} us\n",
                    cj["prep_cpu_us"].get<double>(),
                    from == "stages" ? "what the cached run's prep stages took (fetch, decode, augment, collate)"
                    : from == "P"    ? "from P and its prep CPUs"
                                     : "a sample's CPU on one CPU (cpus-1) less the step's",
                    cj["host_compute_cpu_us"].get<double>());
    if (cj.value("devices", 0) > 0) {
      // What each job gets of the device(s) they share: measured (K synthetic jobs at once) or G x D / K.
      out +=
          fmt::format("  the jobs share {} device(s); a job's device ceiling (samples/s):", cj["devices"].get<int>());
      for (const auto& k : cj["predictions"]) {
        if (!k.value("device_per_job", nlohmann::json()).is_number()) continue;
        out += fmt::format(" {} jobs {:.1f} ({});", k["jobs"].get<int>(), k["device_per_job"].get<double>(),
                           k.value("device_per_job_from", "?"));
      }
      out += "\n";
    }
    // On a CPU: what K jobs computing at once cost each other, where K synthetic jobs measured it.
    std::string extra;
    for (const auto& k : cj["predictions"]) {
      if (!k.value("step_cpu_extra_from", nlohmann::json()).is_string()) continue;
      extra += fmt::format(" {} jobs +{:.0f} ({});", k["jobs"].get<int>(), k["step_cpu_extra_us"].get<double>(),
                           k["step_cpu_extra_from"].get<std::string>());
    }
    if (!extra.empty())
      out += "  the step's CPU with K jobs computing at once, beyond one alone (us a sample):" + extra + "\n";
  }
  if (const auto& pj = r["whatif"].value("partitioned", nlohmann::json()); pj.is_object() && !exec) {
    out += "partitioned cache (per node, samples/s, own -> partitioned):";
    for (const auto& k : pj["predictions"]) {
      const auto& range = k.value("partitioned_range", nlohmann::json());
      // A range that the bound ignores (prep or fetch limits both ends) is not shown.
      const bool spread =
          range.is_array() && std::lround(range[0].get<double>()) != std::lround(range[1].get<double>());
      out += fmt::format(
          " {} nodes caching {:.0f}% each {:.1f} -> {:.1f}{} (x{:.2f});", k["nodes"].get<int>(),
          100 * k["memory_fraction"].get<double>(), k["own"].get<double>(), k["partitioned"].get<double>(),
          spread ? fmt::format(" [{:.0f}-{:.0f}]", range[0].get<double>(), range[1].get<double>()) : std::string(),
          k["gain"].get<double>());
    }
    out += "\n";
    const auto& kj = pj.value("peer_cpu", nlohmann::json());
    if (kj.is_object()) {
      const auto joined = [](const nlohmann::json& us) {
        std::string text;
        for (const auto& p : us) text += fmt::format("{}{:.0f}", text.empty() ? "" : ", ", p.get<double>());
        return text;
      };
      const std::string pairs = joined(kj["pairs_us"]);
      const std::string locals = joined(kj.value("pairs_local_cpu_per_item_us", nlohmann::json::array()));
      // The predictions carry the pairs' range where partitioned_json made one.
      const bool ranged = !pj["predictions"].empty() && pj["predictions"][0].contains("partitioned_range");
      if (!locals.empty() && pj.value("prep_cpu_from", "") == "peer-local")
        out += fmt::format("  a sample's CPU (p): {:.1f} us, from the peer-local nodes (pairs of runs: {} us)\n",
                           pj["prep_cpu_us"].get<double>(), locals);
      // A request's items: a batch's items of one peer with read-ahead (B), one without.
      std::string per;
      if (pj.contains("batch_items")) {
        per = fmt::format(
            "; a node asks each peer once per {} ({:.4f} requests a sample with 2 nodes)",
            pj["batch_items"].get<double>() > 1 ? fmt::format("batch of {:.0f}", pj["batch_items"].get<double>())
                                                : std::string("item"),
            pj["predictions"].empty() ? 0.0 : pj["predictions"][0].value("peer_requests_per_sample", 0.0));
      }
      out += kj["source"] == "nodes"
                 ? fmt::format(
                       "  a peer request's CPU (k): {:.1f} us, from {} nodes on loopback beside their decoding "
                       "(pairs of runs: {} us; [range] = the predictions of the pairs one by one, each with its "
                       "own k and p){}\n",
                       kj["used_us"].get<double>(), kj["nodes"].get<int>(), pairs, per)
                 : fmt::format("  a peer request's CPU (k): {:.1f} us, back to back on loopback{}{}{}\n",
                               kj["used_us"].get<double>(),
                               kj["note"].get<std::string>().empty() ? "" : " (" + kj["note"].get<std::string>() + ")",
                               ranged ? "; [range] = the predictions of the pairs one by one, each with its own p" : "",
                               per);
    }
  }
  const auto& rec = r["recommendation"];
  if (rec.value("withheld", false)) {
    out += fmt::format(
        "\nrecommended cache: none (the what-if failed its self-check)\nrecommended CPUs:  none (from the same curve)\n"
        "verdict: {}\n",
        rec["verdict"].get<std::string>());
  } else {
    std::string page;
    if (rec.value("page_cache_fraction", nlohmann::json()).is_number()) {
      page =
          fmt::format(" (item cache; in the OS page cache: {:.0f}%)", 100 * rec["page_cache_fraction"].get<double>());
    }
    // The recommendation's predicted speed and range, and where the knee is.
    if (rec.value("cache_fraction", nlohmann::json()).is_number() &&
        rec.value("predicted", nlohmann::json()).is_number()) {
      const auto& range = rec["predicted_range"];
      page += fmt::format("; {:.0f}% of the plateau: {:.1f}/s predicted [{:.1f}-{:.1f}]{}",
                          100 * rec.value("plateau_share", kPlateauShare), rec["predicted"].get<double>(),
                          range[0].get<double>(), range[1].get<double>(),
                          rec["knee_fraction"].is_number()
                              ? fmt::format(", the knee at {:.0f}%", 100 * rec["knee_fraction"].get<double>())
                              : std::string());
    }
    out += fmt::format(
        "\nrecommended cache: {}{}\nrecommended CPUs:  {}\nverdict: {}\n",
        rec["cache_fraction"].is_number()
            ? fmt::format("{:.0f}% of the dataset", 100 * rec["cache_fraction"].get<double>())
        : r.value("findings", nlohmann::json()).is_object() && !r["findings"]["fetch"].value("claimed", true)
            ? std::string("none (no measurable fetch stall)")
            : std::string("none is enough"),
        page, rec["cores"].is_number() ? std::to_string(rec["cores"].get<int>()) : std::string("more than measured"),
        rec["verdict"].get<std::string>());
  }
  if (rec.contains("remedy_text")) out += "remedy: " + rec["remedy_text"].get<std::string>() + "\n";
  for (const auto& a : rec.value("advice", nlohmann::json::array())) out += "advice: " + a.get<std::string>() + "\n";
  for (const auto& w : r.value("warnings", nlohmann::json::array())) out += "warning: " + w.get<std::string>() + "\n";
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
