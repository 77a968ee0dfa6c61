// The console table printed after an analysis (see console_summary in analyzer.h): stall.json
// read back through its typed record (core/stall_record.h), part by part, in the order the lines
// are printed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis.h"
#include "analyzer.h"
#include "core/stall_record.h"
#include "job_whatif.h"
#include "nodes.h"
#include "ranks.h"

namespace mlbench::stall {
namespace {

using core::StallRecord;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double or_nan(const std::optional<double>& v) {
  return v.value_or(kNaN);
}

// The rates, and with --rounds how far each run's rounds spread.
std::string rates_text(const StallRecord& r) {
  std::string out;
  const core::StallRates rates = r.rates.value_or(core::StallRates{});
  out += fmt::format("{:<28}{:>12}\n", "rate (samples/s)", "value");
  out += fmt::format("{:<28}{:>12.1f}\n", "G  ingestion (synthetic)", or_nan(rates.G));
  out += fmt::format("{:<28}{:>12.1f}\n", "P  prep (dataset cached)", or_nan(rates.P));
  out += fmt::format("{:<28}{:>12.1f}\n", "F  observed (cold)", or_nan(rates.F_obs));
  out += fmt::format("{:<28}{:>12.1f}\n", "C  fetch from memory", or_nan(rates.C));
  out += fmt::format("{:<28}{:>12.1f}\n", "S  fetch from storage", or_nan(rates.S));
  if (rates.S_model && *rates.S_model != or_nan(rates.S)) {
    const bool at_least = *rates.S_model == or_nan(rates.F_obs);
    out += fmt::format("{:<28}{:>12.1f}  ({})\n", "S  for the what-if", *rates.S_model,
                       at_least ? "the cold run's F: storage gave the pipeline at least that"
                                : "S and the cold run's F, pooled: both measured the storage the cold run waited on");
  }
  if (r.rounds.is_object()) {
    std::string widest;
    double spread = -1;
    for (const auto& [label, pct] : r.round_spread_pct) {
      if (pct > spread) {
        spread = pct;
        widest = label;
      }
    }
    const auto cached = r.round_spread_pct.find("cached");
    const std::string p_spread =
        cached != r.round_spread_pct.end() ? fmt::format("P's runs spread {:.1f}%; ", cached->second) : "";
    out += fmt::format("rounds: {} (each rate from the median of its run's rounds; {}widest spread {:.1f}%, {})\n",
                       r.rounds_count.value_or(0), p_spread, spread, widest);
  }
  return out;
}

// The split with its noise, the shares that are no stall, the direct check and the CPU sweep.
std::string split_text(const StallRecord& r) {
  std::string out;
  const auto& s = r.split;
  const core::StallNoise n = r.noise.value_or(core::StallNoise{});
  out += fmt::format(
      "\nsplit of cold epoch time: compute {:.1f}% (±{:.1f}), prep stall {:.1f}% (±{:.1f}), fetch stall "
      "{:.1f}% (±{:.1f})\n",
      s.compute_pct, n.compute, s.prep_pct, n.prep, s.fetch_pct, n.fetch);
  // Which shares are stalls (larger than twice their noise, possible at the rates measured).
  for (const auto* f : {&r.fetch_finding, &r.prep_finding}) {
    if (*f && !(*f)->claimed.value_or(false)) out += "  " + (*f)->text + "\n";
  }
  if (r.direct && r.direct->stall_pct_cold) {
    const core::StallDirect& d = *r.direct;
    out += fmt::format(
        "direct instrumentation (cold run): {:.1f}% of iteration time waiting for data; differential: "
        "{:.1f}% (disagreement {:.1f} pp)\n",
        *d.stall_pct_cold, or_nan(d.differential_stall_pct), or_nan(d.disagreement_pp));
    if (!d.note.empty()) out += "  " + d.note + "\n";
  }
  if (!r.prep_by_cores.empty()) {
    out += "prep rate by CPUs:";
    for (const auto& [k, v] : r.prep_by_cores) out += fmt::format(" {}: {:.1f}", k, v);
    out += "\n";
  }
  if (r.whatif && r.whatif->model.value_or("overlap") == "overlap" && r.whatif->exposed_fetch_us &&
      *r.whatif->exposed_fetch_us > 0) {
    const double e = *r.whatif->exposed_fetch_us;
    out += fmt::format(
        "fetch not hidden by the pipeline (cold run): {:.1f} us per sample, {:.0f}% of its time; "
        "the what-if charges it to each cache miss\n",
        e, 1e-4 * e * (r.rates ? or_nan(r.rates->F_obs) : kNaN));
  }
  return out;
}

// Each epoch's start, where it costs the run beyond its noise (findings.epoch_start, --exec;
// stall/epoch_start.h): the steps a script prints within an epoch miss it. Absent in older results.
std::string epoch_start_line(const nlohmann::json& result) {
  const auto f = result.value("findings", nlohmann::json::object()).value("epoch_start", nlohmann::json());
  if (!f.is_object() || !f.value("claimed", false)) return "";
  return "epoch start: " + f.value("text", std::string()) + "\n";
}

// A measured point against its prediction and the prediction's range over the rates' noise.
std::string point_line(const core::StallCurvePoint& m, const char* cache) {
  const std::string range =
      m.lo && m.hi && *m.hi > *m.lo ? fmt::format(" [{:.1f}-{:.1f}]", *m.lo, *m.hi) : std::string();
  return fmt::format("{} {:>5.1f}%: measured {:.1f}/s, predicted {:.1f}/s{} ({:.1f}% off)\n", cache, 100 * m.x,
                     or_nan(m.measured), or_nan(m.predicted), range, or_nan(m.error_pct));
}

// The measured points against the curve, the ranges and the model.
std::string whatif_text(const StallRecord& r) {
  if (!r.whatif) return "";
  const core::StallWhatIf& w = *r.whatif;
  std::string out;
  for (const auto& m : w.measured) out += point_line(m, "cache");
  for (const auto& m : w.page_measured) out += point_line(m, "page cache");
  if (const auto& u = w.uncertainty) {
    out += fmt::format(
        "ranges: each prediction over its rates' uncertainty (G ±{:.1f}%, P ±{:.1f}%, F ±{:.1f}%, S "
        "±{:.1f}%), from {}{}\n",
        100 * u->G, 100 * u->P, 100 * u->F_obs, 100 * u->S, u->from,
        r.rounds.is_null() ? "; one run per state cannot see drift between runs: --rounds 3 can" : "");
  }
  if (w.model) out += fmt::format("what-if model: {} ({}), for the {}\n", *w.model, w.model_formula, w.cache);
  if (const auto& m = w.read_ahead) {
    out += fmt::format(
        "read-ahead model: {} read(s) ahead per worker, prep {:.0f} us per sample, storage {:.0f} us, "
        "a miss's CPU {:.0f} us; predicts the cold run at {:.1f}/s ({:.1f}% off)\n",
        m->window.value_or(0), or_nan(m->prep_us), or_nan(m->storage_us), or_nan(m->miss_us), or_nan(m->predicted_cold),
        or_nan(m->cold_error_pct));
  }
  if (const auto& m = w.serial) {
    out += fmt::format(
        "serial model: prep {:.0f} us per sample, storage {:.0f} us, page-cache hit {:.0f} us; "
        "predicts the cold run at {:.1f}/s ({:.1f}% off)\n",
        or_nan(m->prep_us), or_nan(m->storage_us), or_nan(m->page_hit_us), or_nan(m->predicted_cold),
        or_nan(m->cold_error_pct));
  }
  return out;
}

// Where coordinated prep's p came from: what a group shares (prep) and what every job pays (the step).
std::string coordinated_costs(const core::StallCoordinated& c) {
  std::string out = fmt::format(
      "  a sample's prep CPU (p, shared by a group): {:.0f} us, {}; the step's (every job): {:.0f} us\n", c.prep_cpu_us,
      c.prep_cpu_from == "stages" ? "what the cached run's prep stages took (fetch, decode, augment, collate)"
      : c.prep_cpu_from == "P"    ? "from P and its prep CPUs"
                                  : "a sample's CPU on one CPU (cpus-1) less the step's",
      c.host_compute_cpu_us);
  if (c.devices > 0) {
    // What each job gets of the device(s) they share: measured (K synthetic jobs at once) or G x D / K.
    out += fmt::format("  the jobs share {} device(s); a job's device ceiling (samples/s):", c.devices);
    for (const auto& k : c.predictions) {
      if (!k.device_per_job) continue;
      out += fmt::format(" {} jobs {:.1f} ({});", k.jobs, *k.device_per_job,
                         k.device_per_job_from.empty() ? "?" : k.device_per_job_from);
    }
    out += "\n";
  }
  // On a CPU: what K jobs computing at once cost each other, where K synthetic jobs measured it.
  std::string extra;
  for (const auto& k : c.predictions) {
    if (!k.step_cpu_extra_from) continue;
    extra += fmt::format(" {} jobs +{:.0f} ({});", k.jobs, or_nan(k.step_cpu_extra_us), *k.step_cpu_extra_from);
  }
  if (!extra.empty())
    out += "  the step's CPU with K jobs computing at once, beyond one alone (us a sample):" + extra + "\n";
  return out;
}

// Coordinated prep's predictions. Under --exec, mlbench's own remedies (coordinated prep, a
// partitioned cache) are not the script's: stall.json keeps their models, the console does not
// offer them.
std::string coordinated_text(const StallRecord& r) {
  if (r.bench == "exec" || !r.whatif || !r.whatif->coordinated) return "";
  const core::StallCoordinated& c = *r.whatif->coordinated;
  std::string out = "coordinated prep (per job, samples/s):";
  for (const auto& k : c.predictions) {
    out += fmt::format(" {} jobs {:.1f} -> {:.1f} (x{:.2f});", k.jobs, k.uncoordinated, k.coordinated, k.gain);
  }
  return out + "\n" + coordinated_costs(c);
}

std::string joined_us(const std::vector<double>& us) {
  std::string text;
  for (double p : us) text += fmt::format("{}{:.0f}", text.empty() ? "" : ", ", p);
  return text;
}

// Where the partitioned cache's k (a peer request's CPU) and p came from.
std::string peer_cpu_text(const core::StallPartitioned& p, const core::StallPeerCpu& k) {
  std::string out;
  const std::string pairs = joined_us(k.pairs_us);
  const std::string locals = joined_us(k.pairs_local_us);
  // The predictions carry the pairs' range where partitioned_json made one.
  const bool ranged = !p.predictions.empty() && p.predictions[0].range;
  if (!locals.empty() && p.prep_cpu_from == "peer-local")
    out += fmt::format("  a sample's CPU (p): {:.1f} us, from the peer-local nodes (pairs of runs: {} us)\n",
                       or_nan(p.prep_cpu_us), locals);
  // A request's items: a batch's items of one peer with read-ahead (B), one without.
  std::string per;
  if (p.batch_items) {
    per = fmt::format("; a node asks each peer once per {} ({:.4f} requests a sample with 2 nodes)",
                      *p.batch_items > 1 ? fmt::format("batch of {:.0f}", *p.batch_items) : std::string("item"),
                      p.predictions.empty() ? 0.0 : p.predictions[0].peer_requests_per_sample);
  }
  out +=
      k.source == "nodes"
          ? fmt::format(
                "  a peer request's CPU (k): {:.1f} us, from {} nodes on loopback beside their decoding "
                "(pairs of runs: {} us; [range] = the predictions of the pairs one by one, each with its "
                "own k and p){}\n",
                k.used_us, k.nodes, pairs, per)
          : fmt::format("  a peer request's CPU (k): {:.1f} us, back to back on loopback{}{}{}\n", k.used_us,
                        k.note.empty() ? "" : " (" + k.note + ")",
                        ranged ? "; [range] = the predictions of the pairs one by one, each with its own p" : "", per);
  return out;
}

// The partitioned cache's predictions and where its k and p came from (not under --exec).
std::string partitioned_text(const StallRecord& r) {
  if (r.bench == "exec" || !r.whatif || !r.whatif->partitioned) return "";
  const core::StallPartitioned& p = *r.whatif->partitioned;
  std::string out = "partitioned cache (per node, samples/s, own -> partitioned):";
  for (const auto& k : p.predictions) {
    // A range that the bound ignores (prep or fetch limits both ends) is not shown.
    const bool spread = k.range && std::lround(k.range->first) != std::lround(k.range->second);
    out +=
        fmt::format(" {} nodes caching {:.0f}% each {:.1f} -> {:.1f}{} (x{:.2f});", k.nodes, 100 * k.memory_fraction,
                    k.own, k.partitioned,
                    spread ? fmt::format(" [{:.0f}-{:.0f}]", k.range->first, k.range->second) : std::string(), k.gain);
  }
  out += "\n";
  if (p.peer_cpu) out += peer_cpu_text(p, *p.peer_cpu);
  return out;
}

// The recommended cache and CPUs, and the verdict.
std::string verdict_text(const StallRecord& r, const core::StallRecommendation& rec) {
  if (rec.withheld) {
    return fmt::format(
        "\nrecommended cache: none (the what-if failed its self-check)\nrecommended CPUs:  none (from the same curve)\n"
        "verdict: {}\n",
        rec.verdict);
  }
  std::string page;
  if (rec.page_cache_fraction) {
    page = fmt::format(" (item cache; in the OS page cache: {:.0f}%)", 100 * *rec.page_cache_fraction);
  }
  // The recommendation's predicted speed and range, and where the knee is.
  if (rec.cache_fraction && rec.predicted) {
    const auto range = rec.predicted_range.value_or(std::pair{kNaN, kNaN});
    page +=
        fmt::format("; {:.0f}% of the plateau: {:.1f}/s predicted [{:.1f}-{:.1f}]{}",
                    100 * rec.plateau_share.value_or(kPlateauShare), *rec.predicted, range.first, range.second,
                    rec.knee_fraction ? fmt::format(", the knee at {:.0f}%", 100 * *rec.knee_fraction) : std::string());
  }
  return fmt::format("\nrecommended cache: {}{}\nrecommended CPUs:  {}\nverdict: {}\n",
                     rec.cache_fraction ? fmt::format("{:.0f}% of the dataset", 100 * *rec.cache_fraction)
                     : r.fetch_finding && !r.fetch_finding->claimed.value_or(true)
                         ? std::string("none (no measurable fetch stall)")
                         : std::string("none is enough"),
                     page, rec.cores ? std::to_string(*rec.cores) : std::string("more than measured"), rec.verdict);
}

// The recommendation, the verdict, the remedy, the advice and the warnings.
// `result`: stall.json, for recommendation.withheld_note (schema 14; older results have none).
std::string recommendation_text(const StallRecord& r, const nlohmann::json& result) {
  const core::StallRecommendation rec = r.recommendation.value_or(core::StallRecommendation{});
  std::string out = verdict_text(r, rec);
  if (!rec.remedy_text.empty()) out += "remedy: " + rec.remedy_text + "\n";
  // A failed self-check: which remedies it withholds and which stand on their own ranges.
  const auto note = result.value("recommendation", nlohmann::json::object()).value("withheld_note", nlohmann::json());
  if (note.is_string()) out += "withheld: " + note.get<std::string>() + "\n";
  for (const auto& a : rec.advice) out += "advice: " + a + "\n";
  for (const auto& w : r.warnings) out += "warning: " + w + "\n";
  return out;
}

// A dataset over HTTP: the io-depth what-if in a few lines (whatif.http); tar shards: the
// sequential rate and the shuffle buffer (recommendation.shards). Read from the JSON: older results
// have neither.
std::string remote_text(const nlohmann::json& result) {
  std::string out;
  const auto& w = result.value("whatif", nlohmann::json::object());
  const auto io = w.value("http", nlohmann::json());
  if (io.is_object()) {
    out += fmt::format(
        "\nover HTTP: {:.2f} ms a request (L, from the {} run; {:.2f} alone{}), {:.1f} MB/s at {} in flight "
        "(B); --io-depth {} now\n",
        io.value("latency_ms", 0.0), io.value("latency_from", std::string("probe")),
        io.value("probe_latency_ms", io.value("latency_ms", 0.0)),
        // The probes at the start and the end (absent in older results, null with one probe).
        io.value("probe_latency_end_ms", nlohmann::json()).is_number()
            ? fmt::format(": {:.2f} at the start, {:.2f} after the runs, ±{:.1f}%",
                          io.value("probe_latency_start_ms", 0.0), io.value("probe_latency_end_ms", 0.0),
                          100 * io.value("probe_latency_u", 0.0))
            : std::string(),
        io.value("bandwidth_MBps", 0.0), io.value("probe_depth", 0), io.value("io_depth_now", 0));
    // What a request takes from prep (absent in older results).
    if (const auto cpu = io.value("request_cpu", nlohmann::json());
        cpu.is_object() && cpu.value("charged_us", 0.0) > 0) {
      out += fmt::format("  a request's CPU, charged to prep: {:.0f} us (the loader's {:.0f} us",
                         cpu.value("charged_us", 0.0), cpu.value("client_us", 0.0));
      out += cpu.value("server_on_this_machine", false)
                 ? fmt::format(", and {:.0f} us of the rest of this machine: the server shares its CPUs)\n",
                               cpu.value("others_share", 1.0) * cpu.value("others_us", 0.0))
                 : std::string(")\n");
    }
    std::string curve;
    for (const auto& c : io.value("curve", nlohmann::json::array())) {
      curve +=
          fmt::format("{}{}: {:.0f}", curve.empty() ? "" : ", ", c.value("io_depth", 0), c.value("predicted", 0.0));
    }
    out += "  predicted samples/s by --io-depth: " + curve + "\n";
    for (const auto& m : io.value("measured", nlohmann::json::array())) {
      // The prediction's range, where the result has one (absent in older results).
      const auto range = m.value("range", nlohmann::json());
      const std::string span = range.is_array() && range.size() == 2
                                   ? fmt::format(" [{:.0f}-{:.0f}]", range[0].get<double>(), range[1].get<double>())
                                   : std::string();
      // The run's own noise, and for a run that is off where its requests' time went against the model.
      const auto u = m.value("measured_u", nlohmann::json());
      const std::string noise = u.is_number() ? fmt::format(" ±{:.1f}%", 100 * u.get<double>()) : std::string();
      const auto read = m.value("read_ms", nlohmann::json::object());
      std::string why;
      if (m.value("off", false) && read.value("measured", nlohmann::json()).is_number() &&
          read.value("model", nlohmann::json()).is_number()) {
        why = fmt::format("; a read {:.2f} ms, modelled {:.2f}; {:.2f} ms beside it", read["measured"].get<double>(),
                          read["model"].get<double>(), m.value("beside_read_ms", 0.0));
      }
      out += fmt::format("  {:<14} --io-depth {:<3} measured {:8.1f}{}, predicted {:8.1f}{} ({:+.1f}%{}{})\n",
                         m.value("run", ""), m.value("io_depth", 0), m.value("measured", 0.0), noise,
                         m.value("predicted", 0.0), span, m.value("error_pct", 0.0),
                         m.value("off", false) ? ", off" : "", why);
    }
    // The worst miss of a run that is off (older results say nothing of ranges: the worst of all).
    double worst_off = 0;
    bool ranged = false;
    for (const auto& m : io.value("measured", nlohmann::json::array())) {
      ranged = ranged || m.contains("off");
      if (m.value("off", false)) worst_off = std::max(worst_off, std::abs(m.value("error_pct", 0.0)));
    }
    const auto rec = io.value("recommended_io_depth", nlohmann::json());
    out += io.value("self_check_passed", false)
               ? (rec.is_number() ? fmt::format("  recommended --io-depth: {}\n", rec.get<int>()) : std::string())
               : fmt::format("  the model misses a measured run by {:.1f}%{}: no io-depth advice\n",
                             ranged ? worst_off : io.value("max_error_pct", 0.0),
                             ranged ? " (beyond 5%, and outside its range with the run's own noise)" : "");
  }
  const auto shards = result.value("recommendation", nlohmann::json::object()).value("shards", nlohmann::json());
  if (shards.is_string()) out += "\nshards: " + shards.get<std::string>() + "\n";
  return out;
}

}  // namespace

std::string console_summary(const nlohmann::json& result) {
  const StallRecord r = core::parse_stall_record(result);
  return rates_text(r) + split_text(r) + ranks_text(result) + nodes_text(result) + job_whatif_text(result) +
         epoch_start_line(result) + whatif_text(r) + coordinated_text(r) + partitioned_text(r) + remote_text(result) +
         recommendation_text(r, result);
}

}  // namespace mlbench::stall
