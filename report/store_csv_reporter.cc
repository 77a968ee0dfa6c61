// The results store's views as CSV (store_reporters.h): the history, one row per run of a
// series, then an empty line and the machines, one row per benchmark and machine. Shortest
// round-trip numbers; NaN as an empty cell.
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "report/csv_text.h"
#include "report/store_reporters.h"

namespace mlbench::report {
namespace {

using csv::num;
using csv::quoted;

std::string joined(const std::vector<double>& xs) {
  std::string s;
  for (double x : xs) s += (s.empty() ? "" : ";") + num(x);
  return s;
}

void write_history(const History& h, std::ostream& out) {
  out << "bench,machine,machine_label,when,run_id,passes,pass_values,items_per_s,sd_pct,min_pass,max_pass,stall_pct,"
         "instances,failures,compute_ms_per_item,fetch_ms_per_item,prep_ms_per_item,wait_ms_per_item,time_source,"
         "verdict,change_pct,method,p_value,component,component_delta_ms,total_delta_ms,change\n";
  for (const HistorySeries& s : h.series) {
    for (const HistoryRun& r : s.runs) {
      const HistoryChange c = r.change.value_or(HistoryChange{});
      out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                         quoted(s.bench), s.machine, quoted(s.machine_label), r.when, quoted(r.run_id),
                         r.pass_values.size(), joined(r.pass_values), num(r.items_per_s), num(r.sd_pct),
                         num(r.min_pass), num(r.max_pass), num(r.stall_pct), r.instances, r.failures,
                         num(r.time.compute_ms), num(r.time.fetch_ms), num(r.time.prep_ms), num(r.time.wait_ms),
                         r.time.source, c.verdict, num(c.change_pct), c.method, num(c.p_value), quoted(c.component),
                         num(c.component_delta_ms), num(c.total_delta_ms), quoted(c.text));
    }
  }
}

void write_machines(const MachinesView& v, std::ostream& out) {
  out << "bench,machine,machine_label,kind,hostname,run_id,when,items_per_s,relative,stall_pct,passes,failures,"
         "verdict\n";
  for (const MachinesRow& row : v.rows) {
    for (const MachineColumn& m : v.machines) {
      const auto it = row.cells.find(m.fingerprint);
      if (it == row.cells.end()) continue;
      const MachineCell& c = it->second;
      out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", quoted(row.bench), m.fingerprint, quoted(m.label),
                         quoted(m.kind), quoted(m.hostname), quoted(c.run_id), c.when, num(c.items_per_s),
                         num(c.relative), num(c.stall_pct), c.passes, c.failures, quoted(c.verdict));
    }
  }
}

}  // namespace

void StoreCsvReporter::write(const StoreView& view, std::ostream& out) const {
  if (view.history) write_history(*view.history, out);
  if (view.history && view.machines) out << "\n";
  if (view.machines) write_machines(*view.machines, out);
}

}  // namespace mlbench::report
