// The results store's views on the console (store_reporters.h).
#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "report/reporter.h"
#include "report/store_reporters.h"

namespace mlbench::report {
namespace {

// Characters on the screen: UTF-8 continuation bytes take no column ("µs", "–").
std::size_t columns(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Columns padded to their widest cell; `right` aligns a column's cells to the right.
std::string table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right,
                  const std::string& indent) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], columns(row[c]));
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const bool r = c < right.size() && right[c];
      const std::string pad(width[c] - columns(row[c]), ' ');
      line += r ? pad + row[c] : row[c] + pad;
      if (c + 1 < row.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string number(double x, const char* spec = "{:.1f}") {
  return std::isfinite(x) ? fmt::format(fmt::runtime(spec), x) : "-";
}

std::string spread(const HistoryRun& r) {
  if (!std::isfinite(r.min_pass)) return "-";
  return fmt::format("{} – {}", format_items(r.min_pass), format_items(r.max_pass));
}

void write_history(const History& h, std::ostream& out) {
  out << "History" << (h.bench.empty() ? "" : " of " + h.bench) << " (" << h.store
      << "): per benchmark and machine, its runs in time order; items/s = mean of the passes\n";
  if (h.series.empty()) out << "  no run" << (h.bench.empty() ? "" : " of " + h.bench) << " in the store\n";
  for (const HistorySeries& s : h.series) {
    out << "\n"
        << s.bench << " on " << s.machine_label << ": " << s.runs.size() << " run" << (s.runs.size() == 1 ? "" : "s")
        << "\n";
    std::vector<std::vector<std::string>> rows{
        {"when", "run", "passes", "items/s", "sd%", "min – max", "stall%", "time per item", "change"}};
    for (const HistoryRun& r : s.runs) {
      rows.push_back({format_when(r.when), r.run_id, std::to_string(r.pass_values.size()), format_items(r.items_per_s),
                      number(r.sd_pct), spread(r), number(r.stall_pct), format_time_split(r.time),
                      r.change ? r.change->text : ""});
    }
    out << table(rows, {false, false, true, true, true, true, true, false, false}, "  ");
    for (const HistoryRun& r : s.runs) {
      for (const std::string& why : r.failure_reasons) out << "  failed: " << r.run_id << " " << why << "\n";
    }
  }
}

void write_machines(const MachinesView& v, std::ostream& out) {
  out << "Machines (" << v.store
      << "): per benchmark the latest run on each machine: items/s (x the fastest), stall %, the stall "
         "analysis's verdict\n";
  if (v.machines.empty()) {
    out << "  no run in the store\n";
    return;
  }
  std::vector<std::vector<std::string>> rows{{"bench"}};
  for (const MachineColumn& m : v.machines) rows[0].push_back(m.label);
  for (const MachinesRow& row : v.rows) {
    std::vector<std::string> line{row.bench};
    for (const MachineColumn& m : v.machines) {
      const auto it = row.cells.find(m.fingerprint);
      if (it == row.cells.end()) {
        line.push_back("-");
        continue;
      }
      const MachineCell& c = it->second;
      std::string cell = std::isfinite(c.items_per_s) ? fmt::format("{} (x{:.2f}) {}%", format_items(c.items_per_s),
                                                                    c.relative, number(c.stall_pct))
                                                      : "failed";
      if (c.failures > 0 && std::isfinite(c.items_per_s)) cell += fmt::format(" {} failed", c.failures);
      if (!c.verdict.empty()) cell += " " + c.verdict;
      line.push_back(cell);
    }
    rows.push_back(line);
  }
  out << table(rows, {}, "  ");
}

}  // namespace

std::string format_when(const std::string& iso) {
  if (iso.size() < 16 || iso[10] != 'T') return iso.empty() ? "-" : iso;
  return iso.substr(0, 10) + " " + iso.substr(11, 5);
}

std::string format_time_split(const TimePerItem& t) {
  if (!std::isfinite(t.total_ms())) return "-";
  const bool micro = t.total_ms() < 0.01;
  const double k = micro ? 1000.0 : 1.0;
  std::string s =
      fmt::format("compute {:.2f}, fetch {:.2f}, prep {:.2f}", t.compute_ms * k, t.fetch_ms * k, t.prep_ms * k);
  if (t.wait_ms > 0.0) s += fmt::format(", wait {:.2f}", t.wait_ms * k);
  return s + (micro ? " µs" : " ms") + (t.source == "mlbench-stall" ? " (mlbench-stall)" : "");
}

void StoreConsoleReporter::write(const StoreView& view, std::ostream& out) const {
  for (const std::string& n : view.notes) out << n << "\n";
  if (view.history) {
    if (!view.notes.empty()) out << "\n";
    write_history(*view.history, out);
  }
  if (view.machines) {
    if (view.history || !view.notes.empty()) out << "\n";
    write_machines(*view.machines, out);
  }
}

}  // namespace mlbench::report
