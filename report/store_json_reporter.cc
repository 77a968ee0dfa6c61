// The results store's views as JSON (store_reporters.h): every number of the console view.
#include <ostream>

#include "report/reporter.h"
#include "report/store_reporters.h"

namespace mlbench::report {
namespace {

nlohmann::json time_json(const TimePerItem& t) {
  return {{"compute_ms", number_or_null(t.compute_ms)},
          {"fetch_ms", number_or_null(t.fetch_ms)},
          {"prep_ms", number_or_null(t.prep_ms)},
          {"wait_ms", number_or_null(t.wait_ms)},
          {"total_ms", number_or_null(t.total_ms())},
          {"source", t.source.empty() ? nlohmann::json() : nlohmann::json(t.source)}};
}

nlohmann::json change_json(const HistoryChange& c) {
  return {{"verdict", c.verdict},
          {"change_pct", number_or_null(c.change_pct)},
          {"method", c.method},
          {"p_value", number_or_null(c.p_value)},
          {"passes", c.passes},
          {"earlier_passes", c.earlier_passes},
          {"component", c.component.empty() ? nlohmann::json() : nlohmann::json(c.component)},
          {"component_delta_ms", number_or_null(c.component_delta_ms)},
          {"total_delta_ms", number_or_null(c.total_delta_ms)},
          {"text", c.text}};
}

nlohmann::json history_json(const History& h) {
  nlohmann::json series = nlohmann::json::array();
  for (const HistorySeries& s : h.series) {
    nlohmann::json runs = nlohmann::json::array();
    for (const HistoryRun& r : s.runs) {
      nlohmann::json passes = nlohmann::json::array();
      for (double v : r.pass_values) passes.push_back(number_or_null(v));
      runs.push_back({{"run_id", r.run_id},
                      {"when", r.when},
                      {"pass_values", passes},
                      {"items_per_s", number_or_null(r.items_per_s)},
                      {"sd_pct", number_or_null(r.sd_pct)},
                      {"min_pass", number_or_null(r.min_pass)},
                      {"max_pass", number_or_null(r.max_pass)},
                      {"stall_pct", number_or_null(r.stall_pct)},
                      {"instances", r.instances},
                      {"failures", r.failures},
                      {"failure_reasons", r.failure_reasons},
                      {"time_per_item", time_json(r.time)},
                      {"change", r.change ? change_json(*r.change) : nlohmann::json()}});
    }
    series.push_back({{"bench", s.bench}, {"machine", s.machine}, {"machine_label", s.machine_label}, {"runs", runs}});
  }
  return {{"bench", h.bench.empty() ? nlohmann::json() : nlohmann::json(h.bench)}, {"series", series}};
}

nlohmann::json machines_json(const MachinesView& v) {
  nlohmann::json machines = nlohmann::json::array();
  for (const MachineColumn& m : v.machines) {
    machines.push_back(
        {{"fingerprint", m.fingerprint}, {"label", m.label}, {"kind", m.kind}, {"hostname", m.hostname}});
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const MachinesRow& row : v.rows) {
    nlohmann::json cells = nlohmann::json::object();
    for (const auto& [fp, c] : row.cells) {
      cells[fp] = {{"run_id", c.run_id},
                   {"when", c.when},
                   {"items_per_s", number_or_null(c.items_per_s)},
                   {"relative", number_or_null(c.relative)},
                   {"stall_pct", number_or_null(c.stall_pct)},
                   {"passes", c.passes},
                   {"failures", c.failures},
                   {"verdict", c.verdict.empty() ? nlohmann::json() : nlohmann::json(c.verdict)}};
    }
    rows.push_back({{"bench", row.bench}, {"machines", cells}});
  }
  return {{"machines", machines}, {"benchmarks", rows}};
}

}  // namespace

nlohmann::json store_view_to_json(const StoreView& view) {
  return {{"schema_version", kStoreViewJsonSchemaVersion},
          {"store", view.store},
          {"notes", view.notes},
          {"history", view.history ? history_json(*view.history) : nlohmann::json()},
          {"machines", view.machines ? machines_json(*view.machines) : nlohmann::json()}};
}

void StoreJsonReporter::write(const StoreView& view, std::ostream& out) const {
  out << store_view_to_json(view).dump(2) << "\n";
}

}  // namespace mlbench::report
