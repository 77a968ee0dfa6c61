// The measured inputs of a stall analysis (see measured.h).
#include "measured.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "plan.h"

namespace mlbench::stall {

std::optional<double> cpu_per_item_s(const RunOutcome& r, bool system_only) {
  const auto c = r.record().process_cpu;
  if (!c || !c->per_item_us) return std::nullopt;
  const double all = *c->per_item_us / 1e6;
  if (!system_only) return all;
  if (!c->user_s || !c->sys_s) return std::nullopt;
  const double user = *c->user_s, sys = *c->sys_s;
  return user + sys > 0 ? all * sys / (user + sys) : 0.0;
}

// The pipeline's stage timers per item in a run's report (pipeline.stages.<name>.per_item_ms),
// summed over `names`, in seconds; nullopt when none of them is there.
std::optional<double> stages_per_item_s(const core::InstanceReport& report, std::initializer_list<const char*> names) {
  if (!report.pipeline) return std::nullopt;
  double busy = 0;
  bool any = false;
  for (const char* stage : names) {
    const auto st = report.pipeline->stages.find(stage);
    if (st != report.pipeline->stages.end() && st->second.per_item_ms) {
      busy += *st->second.per_item_ms / 1e3;
      any = true;
    }
  }
  return any ? std::optional<double>(busy) : std::nullopt;
}

// A run's spec: as the executor ran it, or for outcomes made without one (a finished analysis
// read back, a test) the one its label names (plan.h).
RunSpec spec_of(const std::string& label, const RunOutcome& r) {
  return r.spec.kind.empty() ? spec_of_label(label) : r.spec;
}

// A report's device: "cpu" when it names none.
bool on_device(const core::InstanceReport& r) {
  return !r.device.empty() && r.device != "cpu";
}

const RunOutcome& need(const std::map<std::string, RunOutcome>& runs, const std::string& label) {
  auto it = runs.find(label);
  if (it == runs.end()) throw std::runtime_error("stall analysis: run '" + label + "' is missing");
  return it->second;
}

double stall_pct_of(const RunOutcome& r) {
  const auto s = r.record().stall;
  return s && s->stall_pct ? *s->stall_pct : std::nan("");
}

// One warning naming the runs whose pipeline skipped corrupt samples (their
// `pipeline.corrupt_samples`), or none: their rates count only the samples
// decoded, so the split and the what-if include runs on a smaller dataset.
std::vector<std::string> skipped_sample_warnings(const std::map<std::string, RunOutcome>& runs) {
  std::string listed;
  std::uint64_t total = 0;
  for (const auto& [label, r] : runs) {
    const auto p = r.record().pipeline;
    if (!p || !p->corrupt_samples || *p->corrupt_samples <= 0) continue;
    const auto n = static_cast<std::uint64_t>(*p->corrupt_samples);
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
  const auto p = r.record().pipeline;
  if (!p || !p->cache_items || items == 0) return -1;
  return *p->cache_items / static_cast<double>(items);
}

MeasuredLoader measured_loader(const RunOutcome& cached, int batch_size, int cores_now) {
  MeasuredLoader l;
  const core::InstanceReport report = cached.record();
  if (!report.pipeline) return l;
  const core::PipelineInfo& p = *report.pipeline;
  l.io_depth = static_cast<int>(p.io_depth);
  if (!p.workers || *p.workers < 1) return l;
  l.known = true;
  l.shape.workers = static_cast<int>(*p.workers);
  l.window = std::max(1, l.io_depth / l.shape.workers);
  if (p.read_ahead_window && *p.read_ahead_window > 0) l.window = static_cast<int>(*p.read_ahead_window);
  l.shape.batch_size = std::max(1, batch_size);
  l.shape.prefetch = std::max(l.shape.workers, static_cast<int>(p.prefetch.value_or(2 * l.shape.workers)));
  int cpus = std::min(l.shape.workers, std::max(1, cores_now));
  if (report.cpu_cores) cpus = std::min(cpus, std::max(1, static_cast<int>(*report.cpu_cores)));
  l.shape.cpus = cpus;
  if (const auto busy = stages_per_item_s(report, {"decode", "augment"})) l.prep_busy_s = *busy;
  return l;
}

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

// The CPU a read takes from prep (the overlap model's term; docs/stall.md, "Analysis", "A read's
// CPU"), from the runs' own process CPU per sample, each term from runs in the regime it applies to:
// - a storage read's extra CPU: the system CPU per sample of the cold runs (`cold`, and
//   `cache-0.00` when measured: their mean) minus the cached run's, which read from the page
//   cache. The system part only: it is the read's own kernel work, steady from run to run,
//   where the user part of a fetch-bound run is mostly its own (workers that sleep on storage
//   wake up to cold caches) and moves with the host's speed;
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

RequestCpu request_cpu_of(const std::map<std::string, RunOutcome>& runs, int prep_cpus, int machine_cpus) {
  RequestCpu c;
  if (prep_cpus < 1) return c;
  c.cpus = prep_cpus;
  c.share = machine_cpus > 0 ? std::min(1.0, static_cast<double>(prep_cpus) / machine_cpus) : 1.0;
  const auto run = [&](const char* label) -> const RunOutcome* {
    const auto it = runs.find(label);
    return it == runs.end() ? nullptr : &it->second;
  };
  // Others' CPU per sample of a run: (machine busy - own busy) / own busy x own CPU per sample.
  const auto others_of = [](const RunOutcome& r) -> std::optional<double> {
    const auto pc = r.record().process_cpu;
    if (!pc || !pc->host_busy_cpus || !pc->busy_cpus || !(*pc->busy_cpus > 0) || !pc->per_item_us) return std::nullopt;
    return std::max(0.0, *pc->host_busy_cpus - *pc->busy_cpus) / *pc->busy_cpus * (*pc->per_item_us / 1e6);
  };
  // The client's own CPU per request where its threads spend it (pipeline/loader_report.cc):
  // each I/O thread's CPU in its reads, and the transfer thread's over the requests it ran.
  for (const auto& [label, r] : runs) {
    const auto& p = r.record().pipeline;
    if (!p || !p->read_ahead_cpu_per_read_us || !p->source_transfer_cpu_s || !(p->source_requests.value_or(0) > 0)) {
      continue;
    }
    c.direct_s[label] = *p->read_ahead_cpu_per_read_us / 1e6 + *p->source_transfer_cpu_s / *p->source_requests;
  }
  const RunOutcome* cold = run("cold");
  const RunOutcome* cached = run("cached");
  const RunOutcome* fetching = run("fetch-cold");
  const RunOutcome* fetch_cached = run("fetch-cached");
  // As the loader's threads spent it with prep beside them: the cached run's, whose requests are
  // its first epoch's, prep running (a request costs more CPU with the CPUs busy: more context
  // switches, colder caches), else the cold run's. Reports without it: the cold run's process CPU
  // per sample less the cached run's, else the fetch-alone runs'.
  if (const auto it = c.direct_s.find("cached"); it != c.direct_s.end()) {
    c.client_s = it->second;
    c.client_from = "cached (its threads)";
  } else if (const auto at = c.direct_s.find("cold"); at != c.direct_s.end()) {
    c.client_s = at->second;
    c.client_from = "cold (its threads)";
  } else if (const auto k_cold = cold ? cpu_per_item_s(*cold) : std::nullopt,
             k_cached = cached ? cpu_per_item_s(*cached) : std::nullopt;
             k_cold && k_cached) {
    c.client_s = std::max(0.0, *k_cold - *k_cached);
    c.client_from = "cold - cached";
  } else if (const auto k_fetch = fetching ? cpu_per_item_s(*fetching) : std::nullopt) {
    const auto k_none = fetch_cached ? cpu_per_item_s(*fetch_cached) : std::nullopt;
    c.client_s = std::max(0.0, *k_fetch - k_none.value_or(0.0));
    c.client_from = "fetch-cold - fetch-cached";
  }
  const auto o_cold = cold ? others_of(*cold) : std::nullopt;
  const auto o_fetch = fetching ? others_of(*fetching) : std::nullopt;
  if (o_cold) {
    c.others_s = *o_cold;
    c.others_from = "cold";
  } else if (o_fetch) {
    c.others_s = *o_fetch;
    c.others_from = "fetch-cold";
  }
  // The charge's range: each term's spread over the runs that measure it (the others beside
  // requests also take a CPU's background: the spread says how much).
  const auto spread = [](double v, std::initializer_list<std::optional<double>> alts, double& lo, double& hi) {
    lo = hi = v;
    for (const auto& a : alts) {
      if (!a) continue;
      lo = std::min(lo, *a);
      hi = std::max(hi, *a);
    }
  };
  const auto direct = [&](const char* label) -> std::optional<double> {
    const auto it = c.direct_s.find(label);
    return it == c.direct_s.end() ? std::nullopt : std::optional<double>(it->second);
  };
  if (!c.client_from.empty() || !c.others_from.empty()) {
    spread(c.client_s, {direct("cached"), direct("cold")}, c.client_lo_s, c.client_hi_s);
    spread(c.others_s, {o_cold, o_fetch}, c.others_lo_s, c.others_hi_s);
  }
  return c;
}

LoadedLatency loaded_latency_of(const std::map<std::string, RunOutcome>& runs) {
  LoadedLatency l;
  const auto pipeline = [&](const char* label) -> std::optional<core::PipelineInfo> {
    const auto it = runs.find(label);
    return it == runs.end() ? std::nullopt : it->second.record().pipeline;
  };
  const auto cached = pipeline("cached"), alone = pipeline("fetch-cold");
  if (!cached || !alone || !(cached->read_ahead_per_read_ms.value_or(0) > 0) ||
      !(alone->read_ahead_per_read_ms.value_or(0) > 0) || cached->epoch_rates.empty()) {
    return l;
  }
  l.ratio = *cached->read_ahead_per_read_ms / *alone->read_ahead_per_read_ms;
  l.rate = cached->epoch_rates.front();
  l.depth = static_cast<int>(cached->io_depth);
  l.from = "cached";
  return l;
}

namespace {

// The noise of a run's rate, relative: that of the mean over its observations (sd / sqrt(n)), or with
// --rounds the spread of its rounds where that is larger (docs/stall.md, "Answers you can act on").
// A run sized by its noise carries the 95% half-width it reached where that is larger: it pools
// the noise between its parts as well as within them, and a run stopped short of the target states
// the wider noise it had (docs/stall.md, "How runs are sized").
double rate_uncertainty(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs,
                        const std::string& label) {
  const RunOutcome& r = need(runs, label);
  const double u = std::max(r.cv / std::sqrt(static_cast<double>(std::max(1, r.observations))),
                            r.half_width.value_or(0.0));
  const auto rounds = ctx.round_rates.find(label);
  if (rounds == ctx.round_rates.end() || rounds->second.size() < 2) return u;
  // The median of k rounds: one run's noise over sqrt(k), or the rounds' own spread if larger.
  const auto& rates = rounds->second;
  return std::max(u / std::sqrt(static_cast<double>(rates.size())), rounds_uncertainty(rates));
}

// G, P, F_obs, S, C, their uncertainty and the split.
void measure_rates(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs, Measured& m) {
  const RunOutcome& synthetic = *m.synthetic;
  // G, the consumer's ceiling, is the synthetic run's speed; but every full run (cached, cold,
  // the CPU sweep's, the cache fractions') fed the same consumer, so G is at least the fastest of
  // them: a synthetic run below one met a slow moment of the host, and G taken from it alone
  // puts the what-if off. The CPU sweep's runs set --cpu-cores, so they fed the same consumer only
  // where it does not compute on those CPUs (on a device), or at the analysed run's own count: a
  // sweep run with more CPUs than the analysed --cpu-cores also computes on more, and would lift G
  // above the analysed consumer's (docs/stall.md, "What it measures", "G is at least what a run reached").
  m.synthetic_report = synthetic.record();
  m.compute_on_device = on_device(m.synthetic_report);
  m.compute_cpus = static_cast<int>(m.synthetic_report.cpu_cores.value_or(0));
  const bool compute_on_device = m.compute_on_device;
  const int compute_cpus = m.compute_cpus;
  const auto same_consumer = [&](const RunSpec& spec) {
    if (spec.kind == "cached" || spec.kind == "cold" || spec.kind == "cache") return true;
    if (spec.kind != "cpus") return false;
    return compute_on_device || spec.cpus == compute_cpus;
  };
  double& G = m.G;
  std::string& G_from = m.G_from;
  G = synthetic.rate;
  G_from = "synthetic";
  for (const auto& [label, r] : runs) {
    const bool full = same_consumer(spec_of(label, r));
    if (full && r.rate > G) {
      G = r.rate;
      G_from = label;
    }
  }
  m.P = m.cached->rate, m.F_obs = m.cold->rate;
  m.S = m.fetch_cold->rate, m.C = m.fetch_cached->rate;

  m.split = split(G, m.P, m.F_obs);
  const auto se = [&](const std::string& label) { return rate_uncertainty(ctx, runs, label); };
  m.u_G = se(G_from), m.u_P = se("cached"), m.u_F = se("cold"), m.u_S = se("fetch-cold"), m.u_C = se("fetch-cached");
  m.noise = split_noise(G, m.P, m.F_obs, m.u_G, m.u_P, m.u_F);
}

// The CPU sweep, the loader and its model, a read's CPU, storage's queue.
void measure_loader(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs, Measured& m) {
  std::map<int, double>& p_by_cores = m.p_by_cores;
  m.sweep = nlohmann::json::object();
  for (const auto& [label, r] : runs) {
    if (const RunSpec spec = spec_of(label, r); spec.kind == "cpus") {
      const int n = spec.cpus;
      p_by_cores[n] = r.rate;
      m.u_p_by_cores[n] = rate_uncertainty(ctx, runs, label);
      m.sweep[std::to_string(n)] = r.rate;
    }
  }
  if (p_by_cores.empty()) p_by_cores[ctx.cores_now] = m.P;

  // The model of the loader measured: with --io-depth 0 its workers fetch and
  // then prep each sample in turn (the serial model, simulated); with reads
  // issued ahead of decode, fetch overlaps prep (the overlap model, which
  // charges the fetch time the cold run did not hide to each miss). A report
  // that does not say how many workers built batches gets the overlap model.
  m.loader = measured_loader(*m.cached, ctx.batch_size, ctx.cores_now);
  const MeasuredLoader& loader = m.loader;
  m.serial = loader.known && loader.io_depth == 0;
  // Reads issued ahead of decode: simulated too (stall/readahead_model.h); the overlap model's
  // min(F(x), P) is optimistic where fetch and prep are close.
  m.reads_ahead = loader.known && loader.io_depth > 0;
  m.simulated = m.serial || m.reads_ahead;
  // The CPU a read takes from prep: P(x) = 1 / (1/P + (reads' CPU beyond the cached run's) / prep's CPUs),
  // for a loader whose report says how many workers prepped.
  m.read_cpu = m.serial || !loader.known ? ReadCpu{} : read_cpu_of(runs, loader.shape.cpus);
  // Storage's queue: a real device serves the reads in flight at once (S in aggregate), so a miss
  // after an idle spell does not wait 1/S; stallsim's emulated device serves one at a time.
  m.cached_report = m.cached->record();
  m.storage_burst = m.cached_report.pipeline && m.cached_report.pipeline->emulated_storage ? 0.0 : loader.io_depth;
}

}  // namespace

Measured measure(const AnalysisContext& ctx, const std::map<std::string, RunOutcome>& runs) {
  Measured m;
  m.synthetic = &need(runs, "synthetic");
  m.cached = &need(runs, "cached");
  m.cold = &need(runs, "cold");
  m.fetch_cold = &need(runs, "fetch-cold");
  m.fetch_cached = &need(runs, "fetch-cached");
  measure_rates(ctx, runs, m);
  measure_loader(ctx, runs, m);
  return m;
}

}  // namespace mlbench::stall
