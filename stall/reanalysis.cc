#include "reanalysis.h"

#include <fstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "analyzer.h"
#include "exec_target.h"
#include "executor.h"

namespace mlbench::stall {
namespace fs = std::filesystem;

namespace {

double number_at(const nlohmann::json& j, const char* key, double fallback = 0) {
  const auto& v = j.is_object() ? j.value(key, nlohmann::json()) : nlohmann::json();
  return v.is_number() ? v.get<double>() : fallback;
}

Residency residency_of(const nlohmann::json& j) {
  Residency r;
  if (!j.is_object()) return r;
  r.files = j.value("files", std::size_t{0});
  r.pages = j.value("pages", std::uint64_t{0});
  r.resident_pages = j.value("resident_pages", std::uint64_t{0});
  return r;
}

}  // namespace

nlohmann::json reanalyze(const fs::path& dir) {
  const fs::path file = dir / "stall.json";
  std::ifstream in(file);
  if (!in)
    throw std::runtime_error(fmt::format("{}: cannot read it (not an mlbench-stall output folder?)", file.string()));
  const nlohmann::json old = nlohmann::json::parse(in, nullptr, false);
  if (old.is_discarded() || !old.is_object())
    throw std::runtime_error(fmt::format("{}: not valid JSON", file.string()));
  for (const char* key : {"bench", "items", "batch_size", "cores", "runs"}) {
    if (!old.contains(key)) throw std::runtime_error(fmt::format("{}: no \"{}\"", file.string(), key));
  }
  AnalysisContext ctx;
  ctx.config.bench = old["bench"].get<std::string>();
  ctx.config.data = old.value("data", std::string());
  ctx.config.iterations = old.value("iterations", 100);
  ctx.items = old["items"].get<std::size_t>();
  ctx.batch_size = old["batch_size"].get<int>();
  ctx.cores_now = old["cores"].get<int>();
  ctx.exec = ctx.config.bench == "exec";
  const auto& storage = old.value("storage", nlohmann::json());
  ctx.dataset_bytes = number_at(storage, "mean_file_bytes") * static_cast<double>(ctx.items);
  if (const auto& rounds = old.value("rounds", nlohmann::json()); rounds.is_object() && rounds.contains("runs")) {
    for (const auto& [label, v] : rounds["runs"].items()) {
      for (const auto& rate : v.value("rates", nlohmann::json::array())) ctx.round_rates[label].push_back(rate);
    }
  }
  RawRates raw;
  raw.seq_cold.mb_per_s = number_at(storage, "seq_cold_MBps");
  raw.rand_cold.mb_per_s = number_at(storage, "rand_cold_MBps");
  raw.cached.mb_per_s = number_at(storage, "cached_MBps");
  raw.mean_file_bytes = number_at(storage, "mean_file_bytes");
  raw.peer_rate = number_at(storage, "peer_rate");
  raw.peer_cpu_s = number_at(storage, "peer_cpu_us") / 1e6;
  raw.peer_ids_per_request = static_cast<int>(number_at(storage, "peer_ids_per_request", 1));

  std::map<std::string, RunOutcome> runs;
  nlohmann::json left_out = nlohmann::json::array();
  for (const auto& [label, v] : old["runs"].items()) {
    if (v.contains("nodes")) {  // several processes: their reports are per node
      left_out.push_back(label);
      continue;
    }
    const std::string report = v.value("report", std::string());
    RunOutcome r;
    if (report.empty() || !fs::exists(report)) {
      // --exec's fetch rates are direct reads of the files, not runs: their rate as written.
      if (!ctx.exec) {
        throw std::runtime_error(fmt::format("{}: run {}'s report {} is missing", file.string(), label,
                                             report.empty() ? "(none named)" : report));
      }
      const auto& p = v.value("pipeline", nlohmann::json());
      r = direct_read_outcome(number_at(v, "rate"), p.is_object() ? p.value("source", std::string("direct reads"))
                                                                  : std::string("direct reads"));
    } else {
      try {
        r = read_outcome(fs::path(report).parent_path(), label);
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("{}: run {}: {}", file.string(), label, e.what()));
      }
    }
    r.before = residency_of(v.value("residency_before", nlohmann::json()));
    r.after = residency_of(v.value("residency_after", nlohmann::json()));
    r.held = v.value("held_in_memory", false);
    r.wall_s = number_at(v, "wall_s");
    runs[label] = std::move(r);
  }
  nlohmann::json result = analyze(ctx, runs, raw);
  for (const char* key : {"rounds", "exec"}) {
    if (old.contains(key)) result[key] = old[key];
  }
  result["reanalysis"] = {
      {"of", file.string()}, {"schema_version", old.value("schema_version", 1)}, {"left_out", left_out}};
  return result;
}

}  // namespace mlbench::stall
