// Reading stall.json into its typed record (see stall_record.h).
#include "core/stall_record.h"

#include <fmt/format.h>

#include "core/json_fields.h"

namespace mlbench::core {
namespace {

using json_fields::Fields;
using json_fields::wrong_type;

void read_recommendation(const Fields& f, StallRecommendation& r) {
  for (auto [key, out] :
       {std::pair{"bound", &r.bound}, {"verdict", &r.verdict}, {"remedy_text", &r.remedy_text}, {"cache", &r.cache}}) {
    f.text(key, *out);
  }
  f.array("advice", [&](const nlohmann::json& v, const std::string& path) {
    if (!v.is_string()) throw wrong_type(path, v, "a string");
    r.advice.push_back(v.get<std::string>());
  });
  f.number("cache_fraction", r.cache_fraction);
  f.number("predicted", r.predicted);
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
    const auto runs = rounds->is_object() ? rounds->find("runs") : rounds->end();
    if (rounds->is_object() && runs != rounds->end() && runs->is_object()) {
      for (const auto& [label, v] : runs->items()) {
        const std::string path = "rounds.runs." + label;
        if (!v.is_object()) throw wrong_type(path, v, "an object");
        Fields(v, path).array("rates", [&](const nlohmann::json& x, const std::string& at) {
          if (!x.is_number()) throw wrong_type(at, x, "a number");
          r.round_rates[label].push_back(x.get<double>());
        });
      }
    }
  }
  if (const nlohmann::json* exec = f.find("exec")) r.exec = *exec;
  if (const nlohmann::json* again = f.find("reanalysis"); again && again->is_object()) {
    Fields(*again, "reanalysis").integer("schema_version", r.reanalysis_of);
  }
}

// whatif.curve and whatif.measured.
void read_curves(const Fields& f, StallRecord& r) {
  const auto w = f.sub("whatif");
  if (!w) return;
  for (auto [key, out] : {std::pair{"curve", &r.curve}, {"measured", &r.measured}}) {
    w->objects(key, [&, out = out](const Fields& p) {
      StallCurvePoint point;
      p.number("x", point.x);
      p.number("fetch", point.fetch);
      p.number("predicted", point.predicted);
      p.number("measured", point.measured);
      out->push_back(point);
    });
  }
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
  read_curves(f, r);
  r.raw = j;
  return r;
}

}  // namespace mlbench::core
