#include "reanalysis.h"

#include <fstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "analyzer.h"
#include "core/stall_record.h"
#include "exec_target.h"
#include "executor.h"

namespace mlbench::stall {
namespace fs = std::filesystem;

namespace {

double or_zero(const std::optional<double>& v) {
  return v.value_or(0.0);
}

Residency residency_of(const std::optional<core::StallResidency>& r) {
  Residency out;
  if (!r) return out;
  out.files = r->files;
  out.pages = r->pages;
  out.resident_pages = r->resident_pages;
  return out;
}

// The finished analysis in `file`, with what --reanalyze needs of it; throws naming what is not there.
core::StallRecord read_finished(const fs::path& file) {
  std::ifstream in(file);
  if (!in)
    throw std::runtime_error(fmt::format("{}: cannot read it (not an mlbench-stall output folder?)", file.string()));
  const nlohmann::json old_json = nlohmann::json::parse(in, nullptr, false);
  if (old_json.is_discarded() || !old_json.is_object())
    throw std::runtime_error(fmt::format("{}: not valid JSON", file.string()));
  core::StallRecord old;
  try {
    old = core::parse_stall_record(old_json);
  } catch (const core::ReportFormatError& e) {
    throw std::runtime_error(fmt::format("{}: {}", file.string(), e.what()));
  }
  for (auto [key, present] : {std::pair{"items", old.items.has_value()},
                              {"batch_size", old.batch_size.has_value()},
                              {"cores", old.cores.has_value()},
                              {"runs", !old.runs.empty()}}) {
    if (!present) throw std::runtime_error(fmt::format("{}: no \"{}\"", file.string(), key));
  }
  return old;
}

}  // namespace

nlohmann::json reanalyze(const fs::path& dir) {
  const fs::path file = dir / "stall.json";
  const core::StallRecord old = read_finished(file);
  AnalysisContext ctx;
  ctx.config.bench = old.bench;
  ctx.config.data = old.data;
  ctx.config.iterations = static_cast<int>(old.iterations.value_or(100));
  ctx.items = static_cast<std::size_t>(*old.items);
  ctx.batch_size = static_cast<int>(*old.batch_size);
  ctx.cores_now = static_cast<int>(*old.cores);
  ctx.exec = ctx.config.bench == "exec";
  const core::StallStorage storage = old.storage.value_or(core::StallStorage{});
  ctx.dataset_bytes = or_zero(storage.mean_file_bytes) * static_cast<double>(ctx.items);
  ctx.round_rates = old.round_rates;
  RawRates raw;
  raw.seq_cold.mb_per_s = or_zero(storage.seq_cold_MBps);
  raw.rand_cold.mb_per_s = or_zero(storage.rand_cold_MBps);
  raw.cached.mb_per_s = or_zero(storage.cached_MBps);
  raw.mean_file_bytes = or_zero(storage.mean_file_bytes);
  raw.peer_rate = or_zero(storage.peer_rate);
  raw.peer_cpu_s = or_zero(storage.peer_cpu_us) / 1e6;
  raw.peer_ids_per_request = static_cast<int>(storage.peer_ids_per_request.value_or(1));
  // A dataset over HTTP: the probe's rates, kept in whatif.http.
  if (const auto* w = old.raw.contains("whatif") ? &old.raw["whatif"] : nullptr;
      w && w->is_object() && w->contains("http") && (*w)["http"].is_object()) {
    const nlohmann::json& io = (*w)["http"];
    raw.remote.latency_s = io.value("probe_latency_ms", io.value("latency_ms", 0.0)) / 1e3;
    raw.remote.probe_latency_s = raw.remote.latency_s;
    // Absent in older results: one probe, its standard error in latency_u.
    raw.remote.u_probe_latency = io.value("probe_latency_u", 0.0);
    const auto ms = [&](const char* key) {
      const auto v = io.value(key, nlohmann::json());
      return v.is_number() ? v.get<double>() / 1e3 : 0.0;
    };
    raw.remote.probe_latency_start_s = ms("probe_latency_start_ms");
    raw.remote.probe_latency_end_s = ms("probe_latency_end_ms");
    raw.remote.bandwidth_Bps = io.value("bandwidth_MBps", 0.0) * 1e6;
    raw.remote.u_bandwidth = io.value("bandwidth_u", 0.0);
    raw.remote.probe_depth = io.value("probe_depth", 0);
    raw.remote.mean_bytes = io.value("mean_object_bytes", 0.0);
    if (io.value("latency_from", "probe") == "probe") raw.remote.u_latency = io.value("latency_u", 0.0);
  }

  std::map<std::string, RunOutcome> runs;
  nlohmann::json left_out = nlohmann::json::array();
  for (const auto& [label, v] : old.runs) {
    if (v.nodes) {  // several processes: their reports are per node
      left_out.push_back(label);
      continue;
    }
    std::string report = v.report;
    // An analysis folder that was moved or copied (to another machine, into a fixture) names
    // reports where they no longer are: its own runs/<label>/ holds them.
    if (!report.empty() && !fs::exists(report)) {
      const fs::path here = file.parent_path() / "runs" / label / fs::path(report).filename();
      if (fs::exists(here)) report = here.string();
    }
    RunOutcome r;
    if (report.empty() || !fs::exists(report)) {
      // --exec's fetch rates are direct reads of the files, not runs: their rate as written.
      if (!ctx.exec) {
        throw std::runtime_error(fmt::format("{}: run {}'s report {} is missing", file.string(), label,
                                             report.empty() ? "(none named)" : report));
      }
      r = direct_read_outcome(or_zero(v.rate), v.pipeline_source.empty() ? "direct reads" : v.pipeline_source);
    } else {
      try {
        r = read_outcome(fs::path(report).parent_path(), label);
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("{}: run {}: {}", file.string(), label, e.what()));
      }
    }
    // A run measured in parts (docs/stall.md, "How runs are sized"): its report is the first part's;
    // the rate and noise the model read are the parts' pooled ones, as written.
    const nlohmann::json* sized =
        old.raw.contains("runs") && old.raw["runs"].contains(label) ? &old.raw["runs"][label] : nullptr;
    if (sized && sized->contains("sizing") && (*sized)["sizing"].is_object() &&
        (*sized)["sizing"].value("pooled", nlohmann::json()).is_object()) {
      const nlohmann::json& pooled = (*sized)["sizing"]["pooled"];
      r.rate = pooled.value("rate", r.rate);
      r.cv = pooled.value("cv", r.cv);
      r.observations = pooled.value("observations", r.observations);
    }
    if (sized && sized->contains("sizing") && (*sized)["sizing"].is_object()) {
      const nlohmann::json& z = (*sized)["sizing"];
      if (z.value("target_pct", nlohmann::json()).is_number() && z.value("half_width_pct", nlohmann::json()).is_number()) {
        r.half_width = z["half_width_pct"].get<double>() / 100;
      }
    }
    r.before = residency_of(v.residency_before);
    r.after = residency_of(v.residency_after);
    r.held = v.held_in_memory;
    r.wall_s = or_zero(v.wall_s);
    runs[label] = std::move(r);
  }
  nlohmann::json result = analyze(ctx, runs, raw);
  if (!old.rounds.is_null()) result["rounds"] = old.rounds;
  // How the runs were sized is of their measuring: kept as it was.
  if (old.raw.contains("sizing")) result["sizing"] = old.raw["sizing"];
  for (const auto& [label, run] : old.raw.value("runs", nlohmann::json::object()).items()) {
    if (run.is_object() && run.contains("sizing") && result["runs"].contains(label)) {
      result["runs"][label]["sizing"] = run["sizing"];
    }
  }
  if (!old.exec.is_null()) result["exec"] = old.exec;
  result["reanalysis"] = {{"of", file.string()}, {"schema_version", old.schema_version}, {"left_out", left_out}};
  return result;
}

}  // namespace mlbench::stall
