// The console table printed after an analysis (see console_summary in analyzer.h): stall.json
// read back, part by part, in the order the lines are printed.
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis.h"
#include "analyzer.h"

namespace mlbench::stall {
namespace {

// The rates, and with --rounds how far each run's rounds spread.
std::string rates_text(const nlohmann::json& r) {
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
  return out;
}

// The split with its noise, the shares that are no stall, the direct check and the CPU sweep.
std::string split_text(const nlohmann::json& r) {
  std::string out;
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
  return out;
}

// The measured points against the curve, the ranges and the model.
std::string whatif_text(const nlohmann::json& r) {
  std::string out;
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
  return out;
}

// Coordinated prep's predictions (not under --exec: mlbench's remedy, not the script's).
std::string coordinated_text(const nlohmann::json& r) {
  std::string out;
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
  return out;
}

// The partitioned cache's predictions and where its k and p came from (not under --exec).
std::string partitioned_text(const nlohmann::json& r) {
  std::string out;
  const bool exec = r.value("bench", std::string()) == "exec";
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
  return out;
}

// The recommendation, the verdict, the remedy, the advice and the warnings.
std::string recommendation_text(const nlohmann::json& r) {
  std::string out;
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

}  // namespace

std::string console_summary(const nlohmann::json& r) {
  return rates_text(r) + split_text(r) + whatif_text(r) + coordinated_text(r) + partitioned_text(r) +
         recommendation_text(r);
}

}  // namespace mlbench::stall
