// Reading stall.json into its typed record (see stall_record.h).
#include "core/stall_record.h"

#include <fmt/format.h>

#include "core/json_fields.h"

namespace mlbench::core {
namespace {

using json_fields::Fields;
using json_fields::wrong_type;

// An array of numbers at `key`.
std::vector<double> numbers(const Fields& f, const char* key) {
  std::vector<double> out;
  f.array(key, [&](const nlohmann::json& v, const std::string& path) {
    if (!v.is_number()) throw wrong_type(path, v, "a number");
    out.push_back(v.get<double>());
  });
  return out;
}

// [lo, hi] at `key`.
std::optional<std::pair<double, double>> range(const Fields& f, const char* key) {
  const nlohmann::json* v = f.find(key);
  if (!v) return std::nullopt;
  const std::vector<double> xs = numbers(f, key);
  if (xs.size() != 2) throw wrong_type(f.at(key), *v, "[low, high]");
  return std::pair{xs[0], xs[1]};
}

void read_recommendation(const Fields& f, StallRecommendation& r) {
  for (auto [key, out] :
       {std::pair{"bound", &r.bound}, {"verdict", &r.verdict}, {"remedy_text", &r.remedy_text}, {"cache", &r.cache}}) {
    f.text(key, *out);
  }
  f.array("advice", [&](const nlohmann::json& v, const std::string& path) {
    if (!v.is_string()) throw wrong_type(path, v, "a string");
    r.advice.push_back(v.get<std::string>());
  });
  for (auto [key, out] : {std::pair{"cache_fraction", &r.cache_fraction},
                          {"predicted", &r.predicted},
                          {"page_cache_fraction", &r.page_cache_fraction},
                          {"knee_fraction", &r.knee_fraction},
                          {"plateau_share", &r.plateau_share}}) {
    f.number(key, *out);
  }
  r.predicted_range = range(f, "predicted_range");
  f.integer("cores", r.cores);
  f.flag("withheld", r.withheld);
}

StallResidency read_residency(const Fields& f) {
  StallResidency r;
  std::int64_t files = 0, pages = 0, resident = 0;
  f.integer("files", files);
  f.integer("pages", pages);
  f.integer("resident_pages", resident);
  r.files = static_cast<std::uint64_t>(files);
  r.pages = static_cast<std::uint64_t>(pages);
  r.resident_pages = static_cast<std::uint64_t>(resident);
  return r;
}

void read_run(const Fields& f, StallRun& run) {
  f.text("report", run.report);
  f.number("rate", run.rate);
  f.number("wall_s", run.wall_s);
  f.flag("held_in_memory", run.held_in_memory);
  run.nodes = f.find("nodes") != nullptr;
  for (auto [key, out] :
       {std::pair{"residency_before", &run.residency_before}, {"residency_after", &run.residency_after}}) {
    f.block(key, *out, [](const Fields& r, StallResidency& res) { res = read_residency(r); });
  }
  if (const nlohmann::json* p = f.find("pipeline"); p && p->is_object()) {
    Fields(*p, f.at("pipeline")).text("source", run.pipeline_source);
  }
}

void read_context(const Fields& f, StallRecord& r) {
  f.text("data", r.data);
  f.integer("items", r.items);
  f.integer("batch_size", r.batch_size);
  f.integer("cores", r.cores);
  f.integer("iterations", r.iterations);
  f.block("storage", r.storage, [](const Fields& s, StallStorage& st) {
    for (auto [key, out] : {std::pair{"mean_file_bytes", &st.mean_file_bytes},
                            {"seq_cold_MBps", &st.seq_cold_MBps},
                            {"rand_cold_MBps", &st.rand_cold_MBps},
                            {"cached_MBps", &st.cached_MBps},
                            {"peer_rate", &st.peer_rate},
                            {"peer_cpu_us", &st.peer_cpu_us}}) {
      s.number(key, *out);
    }
    s.integer("peer_ids_per_request", st.peer_ids_per_request);
  });
  f.members("runs", [&](const std::string& label, const Fields& run) { read_run(run, r.runs[label]); });
  if (const nlohmann::json* rounds = f.find("rounds")) {
    r.rounds = *rounds;
    if (rounds->is_object()) Fields(*rounds, "rounds").integer("count", r.rounds_count);
    const auto runs = rounds->is_object() ? rounds->find("runs") : rounds->end();
    if (rounds->is_object() && runs != rounds->end() && runs->is_object()) {
      for (const auto& [label, v] : runs->items()) {
        const std::string path = "rounds.runs." + label;
        if (!v.is_object()) throw wrong_type(path, v, "an object");
        const Fields run(v, path);
        r.round_rates[label] = numbers(run, "rates");
        run.number("spread_pct", r.round_spread_pct[label]);
      }
    }
  }
  if (const nlohmann::json* exec = f.find("exec")) r.exec = *exec;
  if (const nlohmann::json* again = f.find("reanalysis"); again && again->is_object()) {
    Fields(*again, "reanalysis").integer("schema_version", r.reanalysis_of);
  }
}

void read_points(const Fields& f, const char* key, std::vector<StallCurvePoint>& out) {
  f.objects(key, [&](const Fields& p) {
    StallCurvePoint point;
    p.number("x", point.x);
    for (auto [k, v] : {std::pair{"fetch", &point.fetch},
                        {"predicted", &point.predicted},
                        {"measured", &point.measured},
                        {"lo", &point.lo},
                        {"hi", &point.hi},
                        {"error_pct", &point.error_pct}}) {
      p.number(k, *v);
    }
    out.push_back(point);
  });
}

void read_coordinated(const Fields& c, StallCoordinated& out) {
  c.objects("predictions", [&](const Fields& k) {
    StallCoordinatedPrediction p;
    k.integer("jobs", p.jobs);
    k.number("uncoordinated", p.uncoordinated);
    k.number("coordinated", p.coordinated);
    k.number("gain", p.gain);
    k.number("device_per_job", p.device_per_job);
    k.text("device_per_job_from", p.device_per_job_from);
    k.number("step_cpu_extra_us", p.step_cpu_extra_us);
    k.text("step_cpu_extra_from", p.step_cpu_extra_from);
    out.predictions.push_back(std::move(p));
  });
  c.text("prep_cpu_from", out.prep_cpu_from);
  c.number("prep_cpu_us", out.prep_cpu_us);
  c.number("host_compute_cpu_us", out.host_compute_cpu_us);
  c.integer("devices", out.devices);
}

void read_partitioned(const Fields& f, StallPartitioned& out) {
  f.objects("predictions", [&](const Fields& k) {
    StallPartitionedPrediction p;
    k.integer("nodes", p.nodes);
    for (auto [key, v] : {std::pair{"memory_fraction", &p.memory_fraction},
                          {"own", &p.own},
                          {"partitioned", &p.partitioned},
                          {"gain", &p.gain},
                          {"peer_requests_per_sample", &p.peer_requests_per_sample}}) {
      k.number(key, *v);
    }
    p.range = range(k, "partitioned_range");
    out.predictions.push_back(std::move(p));
  });
  f.block("peer_cpu", out.peer_cpu, [](const Fields& k, StallPeerCpu& peer) {
    k.text("source", peer.source);
    k.text("note", peer.note);
    k.number("used_us", peer.used_us);
    k.integer("nodes", peer.nodes);
    peer.pairs_us = numbers(k, "pairs_us");
    peer.pairs_local_us = numbers(k, "pairs_local_cpu_per_item_us");
  });
  f.text("prep_cpu_from", out.prep_cpu_from);
  f.number("prep_cpu_us", out.prep_cpu_us);
  f.number("batch_items", out.batch_items);
}

void read_loader_model(const Fields& f, StallLoaderModel& m) {
  f.integer("window", m.window);
  for (auto [key, v] : {std::pair{"prep_us", &m.prep_us},
                        {"storage_us", &m.storage_us},
                        {"miss_us", &m.miss_us},
                        {"page_hit_us", &m.page_hit_us},
                        {"predicted_cold", &m.predicted_cold},
                        {"cold_error_pct", &m.cold_error_pct}}) {
    f.number(key, *v);
  }
}

void read_whatif(const Fields& w, StallWhatIf& out) {
  w.text("model", out.model);
  w.text("model_formula", out.model_formula);
  w.text("cache", out.cache);
  w.number("exposed_fetch_us", out.exposed_fetch_us);
  read_points(w, "curve", out.curve);
  read_points(w, "measured", out.measured);
  if (const auto page = w.sub("page_cache")) read_points(*page, "measured", out.page_measured);
  w.block("uncertainty", out.uncertainty, [](const Fields& u, StallUncertainty& v) {
    for (auto [key, x] : {std::pair{"G", &v.G}, {"P", &v.P}, {"F_obs", &v.F_obs}, {"S", &v.S}}) u.number(key, *x);
    u.text("from", v.from);
  });
  w.block("read_ahead", out.read_ahead, read_loader_model);
  w.block("serial", out.serial, read_loader_model);
  w.block("coordinated", out.coordinated, read_coordinated);
  w.block("partitioned", out.partitioned, read_partitioned);
}

// What the console prints beside the split: its noise, the findings, the direct check, the sweep.
void read_split_context(const Fields& f, StallRecord& r) {
  f.block("noise_pp", r.noise, [](const Fields& n, StallNoise& v) {
    for (auto [key, x] : {std::pair{"compute", &v.compute}, {"prep", &v.prep}, {"fetch", &v.fetch}}) n.number(key, *x);
  });
  if (const auto findings = f.sub("findings")) {
    for (auto [key, out] : {std::pair{"fetch", &r.fetch_finding}, {"prep", &r.prep_finding}}) {
      findings->block(key, *out, [](const Fields& k, StallFinding& v) {
        k.flag("claimed", v.claimed);
        k.text("text", v.text);
      });
    }
  }
  f.block("direct", r.direct, [](const Fields& d, StallDirect& v) {
    for (auto [key, x] : {std::pair{"stall_pct_cold", &v.stall_pct_cold},
                          {"differential_stall_pct", &v.differential_stall_pct},
                          {"disagreement_pp", &v.disagreement_pp}}) {
      d.number(key, *x);
    }
    d.text("note", v.note);
  });
  if (const auto sweep = f.sub("prep_by_cores")) {
    for (const auto& [cores, rate] : sweep->object().items()) sweep->number(cores.c_str(), r.prep_by_cores[cores]);
  }
  f.array("warnings", [&](const nlohmann::json& v, const std::string& path) {
    if (!v.is_string()) throw wrong_type(path, v, "a string");
    r.warnings.push_back(v.get<std::string>());
  });
}

}  // namespace

StallRecord parse_stall_record(const nlohmann::json& j) {
  if (!j.is_object()) throw wrong_type("stall.json", j, "an object");
  const Fields f(j, "");
  StallRecord r;
  std::int64_t schema = 1;
  f.integer("schema_version", schema);
  if (schema > kStallSchema) {
    throw ReportFormatError(
        fmt::format("schema_version {} is newer than this mlbench reads ({}): update mlbench", schema, kStallSchema));
  }
  r.schema_version = static_cast<int>(schema);
  if (!f.find("bench")) throw ReportFormatError("no \"bench\" name");
  f.text("bench", r.bench);
  const auto s = f.sub("split");
  if (!s) throw ReportFormatError("no \"split\" object");
  for (auto [key, out] : {std::pair{"compute_pct", &r.split.compute_pct},
                          {"prep_pct", &r.split.prep_pct},
                          {"fetch_pct", &r.split.fetch_pct}}) {
    if (!s->find(key)) throw ReportFormatError(fmt::format("split.{} is missing", key));
    s->number(key, *out);
  }
  f.block("rates", r.rates, [](const Fields& rates, StallRates& out) {
    for (auto [key, v] : {std::pair{"G", &out.G}, {"P", &out.P}, {"F_obs", &out.F_obs}, {"C", &out.C}, {"S", &out.S}}) {
      rates.number(key, *v);
    }
    rates.number("S_model", out.S_model);
    out.raw = rates.object();
  });
  f.block("self_check", r.self_check, [](const Fields& c, StallSelfCheck& out) {
    c.flag("passed", out.passed);
    c.number("max_error_pct", out.max_error_pct);
    c.number("threshold_pct", out.threshold_pct);
    c.text("text", out.text);
    c.text("cause", out.cause);
    out.raw = c.object();
  });
  f.block("recommendation", r.recommendation, read_recommendation);
  read_context(f, r);
  read_split_context(f, r);
  f.block("whatif", r.whatif, read_whatif);
  r.raw = j;
  return r;
}

}  // namespace mlbench::core
