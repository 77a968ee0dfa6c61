// The history and machines views of the results store (see store_views.h).
#include "report/store_views.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "core/statistics.h"
#include "report/reporter.h"
#include "report/significance.h"

namespace mlbench::report {
namespace {

double finite_mean(const std::vector<double>& xs) {
  std::vector<double> v;
  for (double x : xs) {
    if (std::isfinite(x)) v.push_back(x);
  }
  return v.empty() ? kNaN : core::mean(v);
}

double value_or_nan(const std::optional<double>& x) {
  return x ? *x : kNaN;
}

// One run of one benchmark on one machine, as its instances add up.
struct RunAggregate {
  store::RunRecord run;
  std::map<std::int64_t, std::vector<double>> pass_items;  // pass -> items/s of its non-failed instances
  std::vector<double> stall_pct, wait_s, h2d_s, compute_s, fetch_ms, prep_ms;
  int instances = 0, failures = 0;
  std::vector<std::string> failure_reasons;

  void add(const store::InstanceRecord& i) {
    ++instances;
    const bool has_value = i.items_per_s && std::isfinite(*i.items_per_s) && *i.items_per_s > 0.0;
    if (i.failed || !has_value) {
      ++failures;
      failure_reasons.push_back(
          fmt::format("pass {} slot {}: {}", i.pass, i.slot, i.reason.empty() ? std::string("no items/s") : i.reason));
      pass_items[i.pass];  // the pass exists, even when nothing in it passed
      return;
    }
    pass_items[i.pass].push_back(*i.items_per_s);
    stall_pct.push_back(value_or_nan(i.stall_pct));
    wait_s.push_back(value_or_nan(i.wait_s));
    h2d_s.push_back(value_or_nan(i.h2d_s));
    compute_s.push_back(value_or_nan(i.compute_s));
    fetch_ms.push_back(value_or_nan(i.fetch_ms_per_item));
    prep_ms.push_back(value_or_nan(i.prep_ms_per_item));
  }

  std::vector<double> pass_values() const {
    std::vector<double> out;
    for (const auto& [pass, items] : pass_items) {
      if (!items.empty()) out.push_back(core::mean(items));
    }
    return out;
  }
};

// (bench, machine) -> run_id -> aggregate.
using Aggregates = std::map<std::pair<std::string, std::string>, std::map<std::string, RunAggregate>>;

Aggregates aggregate(const std::vector<store::HistoryInstance>& instances) {
  Aggregates out;
  for (const store::HistoryInstance& h : instances) {
    RunAggregate& a = out[{h.instance.bench, h.run.machine}][h.run.run_id];
    if (a.run.run_id.empty()) a.run = h.run;
    a.add(h.instance);
  }
  return out;
}

// The runs of one series in time order (then by id, for runs started in the same second).
std::vector<const RunAggregate*> in_time_order(const std::map<std::string, RunAggregate>& runs) {
  std::vector<const RunAggregate*> out;
  for (const auto& [id, a] : runs) out.push_back(&a);
  std::sort(out.begin(), out.end(), [](const RunAggregate* x, const RunAggregate* y) {
    return std::tie(x->run.started_at, x->run.run_id) < std::tie(y->run.started_at, y->run.run_id);
  });
  return out;
}

// The analysis of this benchmark and machine that speaks for a run: one recorded in the run,
// else the latest recorded before it started; none for runs before every analysis (their
// split comes from their reports).
const store::StallAnalysisRecord* analysis_for(const std::vector<const store::StallAnalysisRecord*>& analyses,
                                               const store::RunRecord& run) {
  const store::StallAnalysisRecord* before = nullptr;
  for (const store::StallAnalysisRecord* a : analyses) {
    if (!a->run_id.empty() && a->run_id == run.run_id) return a;
    if (a->recorded_at <= run.started_at && (!before || a->recorded_at >= before->recorded_at)) before = a;
  }
  return before;
}

std::vector<const store::StallAnalysisRecord*> analyses_of(const std::vector<store::StallAnalysisRecord>& analyses,
                                                           const std::string& bench, const std::string& machine) {
  std::vector<const store::StallAnalysisRecord*> out;
  for (const store::StallAnalysisRecord& a : analyses) {
    if (a.bench == bench && a.machine == machine) out.push_back(&a);
  }
  return out;
}

double by_name(const TimePerItem& t, const std::string& component) {
  if (component == "compute") return t.compute_ms;
  if (component == "fetch") return t.fetch_ms;
  if (component == "prep") return t.prep_ms;
  return t.wait_ms;
}

constexpr const char* kComponents[] = {"compute", "fetch", "prep", "data wait"};

// The component that grew most (regression) or shrank most (improvement) against the mean
// of the earlier runs; "" when the times are not comparable.
void name_component(HistoryChange& c, const TimePerItem& time, const std::vector<TimePerItem>& earlier) {
  if (!std::isfinite(time.total_ms())) return;
  std::vector<const TimePerItem*> timed;
  bool same_analysis = !time.analysis_id.empty();
  for (const TimePerItem& t : earlier) {
    if (std::isfinite(t.total_ms()) && t.source == time.source) {
      timed.push_back(&t);
      same_analysis = same_analysis && t.analysis_id == time.analysis_id;
    }
  }
  if (timed.empty() || same_analysis) return;
  const bool regression = c.verdict == "regression";
  double total_before = 0.0;
  for (const TimePerItem* t : timed) total_before += t->total_ms() / static_cast<double>(timed.size());
  c.total_delta_ms = time.total_ms() - total_before;
  for (const char* component : kComponents) {
    double before = 0.0;
    for (const TimePerItem* t : timed) before += by_name(*t, component) / static_cast<double>(timed.size());
    const double delta = by_name(time, component) - before;
    if (!std::isfinite(c.component_delta_ms) ||
        (regression ? delta > c.component_delta_ms : delta < c.component_delta_ms)) {
      c.component = component;
      c.component_delta_ms = delta;
    }
  }
}

}  // namespace

std::string format_ms_per_item(double ms, bool sign) {
  if (!std::isfinite(ms)) return "-";
  const bool micro = std::abs(ms) < 0.01 && ms != 0.0;
  const double v = micro ? ms * 1000.0 : ms;
  const std::string number = sign ? fmt::format("{:+.2f}", v) : fmt::format("{:.2f}", v);
  // Values far below 0.01 µs (millions of items/s): 3 significant digits instead.
  const std::string text =
      std::abs(v) < 0.01 && v != 0.0 ? (sign ? fmt::format("{:+.3g}", v) : fmt::format("{:.3g}", v)) : number;
  return text + (micro ? " µs/item" : " ms/item");
}

std::string machine_label(const std::string& fingerprint, const std::vector<store::MachineRecord>& machines) {
  for (const store::MachineRecord& m : machines) {
    if (m.fingerprint == fingerprint) {
      const std::string kind = m.kind.empty() ? "unknown kind" : m.kind;
      return m.hostname.empty() ? kind : kind + " / " + m.hostname;
    }
  }
  return fingerprint.empty() ? "unknown machine" : fingerprint;
}

TimePerItem time_per_item(double items_per_s, double wait_s, double h2d_s, double compute_s, double fetch_ms_per_item,
                          double prep_ms_per_item, const store::StallAnalysisRecord* analysis) {
  TimePerItem t;
  if (!std::isfinite(items_per_s) || items_per_s <= 0.0) return t;
  const double per_item_ms = 1000.0 / items_per_s;
  if (analysis) {
    t.compute_ms = per_item_ms * analysis->compute_pct / 100.0;
    t.prep_ms = per_item_ms * analysis->prep_pct / 100.0;
    t.fetch_ms = per_item_ms * analysis->fetch_pct / 100.0;
    t.source = "mlbench-stall";
    t.analysis_id = analysis->analysis_id.empty() ? analysis->recorded_at : analysis->analysis_id;
    return t;
  }
  const double waiting = (std::isfinite(wait_s) ? wait_s : 0.0) + (std::isfinite(h2d_s) ? h2d_s : 0.0);
  const double iteration = waiting + compute_s;
  if (!std::isfinite(compute_s) || !(iteration > 0.0)) return t;
  t.compute_ms = per_item_ms * compute_s / iteration;
  const double wait_ms = per_item_ms * waiting / iteration;
  const double f = std::isfinite(fetch_ms_per_item) ? std::max(fetch_ms_per_item, 0.0) : 0.0;
  const double p = std::isfinite(prep_ms_per_item) ? std::max(prep_ms_per_item, 0.0) : 0.0;
  if (f + p > 0.0) {
    t.fetch_ms = wait_ms * f / (f + p);
    t.prep_ms = wait_ms * p / (f + p);
  } else {
    t.fetch_ms = 0.0;
    t.prep_ms = 0.0;
    t.wait_ms = wait_ms;
  }
  t.source = "reports";
  return t;
}

HistoryChange compare_with_earlier(const std::vector<double>& passes, const std::vector<double>& earlier_passes,
                                   const TimePerItem& time, const std::vector<TimePerItem>& earlier_time) {
  HistoryChange c;
  c.passes = static_cast<int>(passes.size());
  c.earlier_passes = static_cast<int>(earlier_passes.size());
  if (passes.empty() || earlier_passes.empty()) {
    c.verdict = "not compared";
    c.text = passes.empty() ? "not compared (no pass of this run passed)" : "not compared (no earlier pass passed)";
    return c;
  }
  const double now = core::mean(passes), before = core::mean(earlier_passes);
  c.change_pct = (now / before - 1.0) * 100.0;
  const int needed = passes_needed_per_side();
  bool flagged = false;
  if (c.passes >= needed && c.earlier_passes >= needed) {
    const MannWhitney mw = mann_whitney_u(passes, earlier_passes);
    c.method = "mann-whitney";
    c.p_value = mw.p_value;
    flagged = mw.p_value < kSignificanceAlpha;
    c.verdict = !flagged ? "no change" : now < before ? "regression" : "improvement";
    c.text = flagged ? fmt::format("{} {:+.1f}% (p {})", c.verdict, c.change_pct, format_p(mw.p_value))
                     : fmt::format("no significant change ({:+.1f}%, p {})", c.change_pct, format_p(mw.p_value));
  } else {
    // Too few passes: the test cannot reach alpha (min_two_sided_p), so only a change beyond the
    // threshold and outside every earlier pass is flagged, and it says how it was judged.
    c.method = "by size";
    const auto [lo, hi] = std::minmax_element(earlier_passes.begin(), earlier_passes.end());
    flagged = std::abs(now / before - 1.0) > kBySizeThreshold && (now < *lo || now > *hi);
    c.verdict = !flagged ? "no change" : now < before ? "regression" : "improvement";
    const std::string how =
        fmt::format("by size; {} v {} passes, the test needs {} a side", c.passes, c.earlier_passes, needed);
    c.text = flagged ? fmt::format("{} {:+.1f}% ({})", c.verdict, c.change_pct, how)
                     : fmt::format("no change beyond the spread ({:+.1f}%; {})", c.change_pct, how);
  }
  if (!flagged) return c;
  name_component(c, time, earlier_time);
  if (!c.component.empty()) {
    // Both figures in one unit: "(+0.41 ms/item of +0.52)".
    const bool micro = std::max(std::abs(c.component_delta_ms), std::abs(c.total_delta_ms)) < 0.01;
    const double scale = micro ? 1000.0 : 1.0;
    c.text += fmt::format("; its time {} {} ({:+.2f} {}/item of {:+.2f})",
                          c.verdict == "regression" ? "moved into" : "came out of", c.component,
                          c.component_delta_ms * scale, micro ? "µs" : "ms", c.total_delta_ms * scale);
  }
  return c;
}

History build_history(const std::vector<store::HistoryInstance>& instances,
                      const std::vector<store::MachineRecord>& machines,
                      const std::vector<store::StallAnalysisRecord>& analyses) {
  History h;
  for (const auto& [key, runs] : aggregate(instances)) {
    HistorySeries s;
    s.bench = key.first;
    s.machine = key.second;
    s.machine_label = machine_label(key.second, machines);
    const auto series_analyses = analyses_of(analyses, s.bench, s.machine);
    std::vector<double> earlier;
    std::vector<TimePerItem> earlier_time;
    for (const RunAggregate* a : in_time_order(runs)) {
      HistoryRun r;
      r.run_id = a->run.run_id;
      r.when = a->run.started_at;
      r.pass_values = a->pass_values();
      r.instances = a->instances;
      r.failures = a->failures;
      r.failure_reasons = a->failure_reasons;
      if (!r.pass_values.empty()) {
        r.items_per_s = core::mean(r.pass_values);
        r.min_pass = *std::min_element(r.pass_values.begin(), r.pass_values.end());
        r.max_pass = *std::max_element(r.pass_values.begin(), r.pass_values.end());
        if (r.pass_values.size() >= 2) r.sd_pct = core::sd_sample(r.pass_values) / r.items_per_s * 100.0;
      }
      r.stall_pct = finite_mean(a->stall_pct);
      r.time = time_per_item(r.items_per_s, finite_mean(a->wait_s), finite_mean(a->h2d_s), finite_mean(a->compute_s),
                             finite_mean(a->fetch_ms), finite_mean(a->prep_ms), analysis_for(series_analyses, a->run));
      if (!s.runs.empty()) r.change = compare_with_earlier(r.pass_values, earlier, r.time, earlier_time);
      earlier.insert(earlier.end(), r.pass_values.begin(), r.pass_values.end());
      if (std::isfinite(r.time.total_ms())) earlier_time.push_back(r.time);
      s.runs.push_back(std::move(r));
    }
    h.series.push_back(std::move(s));
  }
  std::sort(h.series.begin(), h.series.end(), [](const HistorySeries& x, const HistorySeries& y) {
    return std::tie(x.bench, x.machine_label) < std::tie(y.bench, y.machine_label);
  });
  return h;
}

MachinesView build_machines_view(const std::vector<store::HistoryInstance>& instances,
                                 const std::vector<store::MachineRecord>& machines,
                                 const std::vector<store::StallAnalysisRecord>& analyses) {
  MachinesView v;
  std::map<std::string, MachinesRow> rows;
  std::map<std::string, MachineColumn> columns;
  for (const auto& [key, runs] : aggregate(instances)) {
    const auto& [bench, machine] = key;
    const RunAggregate& latest = *in_time_order(runs).back();
    MachineCell cell;
    cell.run_id = latest.run.run_id;
    cell.when = latest.run.started_at;
    const std::vector<double> passes = latest.pass_values();
    cell.passes = static_cast<int>(passes.size());
    cell.failures = latest.failures;
    if (!passes.empty()) cell.items_per_s = core::mean(passes);
    cell.stall_pct = finite_mean(latest.stall_pct);
    const store::StallAnalysisRecord* newest = nullptr;
    for (const store::StallAnalysisRecord* a : analyses_of(analyses, bench, machine)) {
      if (!newest || a->recorded_at >= newest->recorded_at) newest = a;
    }
    if (newest) cell.verdict = newest->verdict;
    rows[bench].bench = bench;
    rows[bench].cells[machine] = cell;
    if (!columns.count(machine)) {
      MachineColumn c;
      c.fingerprint = machine;
      c.label = machine_label(machine, machines);
      for (const store::MachineRecord& m : machines) {
        if (m.fingerprint == machine) {
          c.kind = m.kind;
          c.hostname = m.hostname;
        }
      }
      columns[machine] = c;
    }
  }
  for (auto& [bench, row] : rows) {
    double best = kNaN;
    for (const auto& [m, cell] : row.cells) {
      if (std::isfinite(cell.items_per_s) && !(cell.items_per_s <= best)) best = cell.items_per_s;
    }
    for (auto& [m, cell] : row.cells) cell.relative = cell.items_per_s / best;
    v.rows.push_back(std::move(row));
  }
  for (auto& [fp, c] : columns) v.machines.push_back(std::move(c));
  std::sort(v.machines.begin(), v.machines.end(),
            [](const MachineColumn& x, const MachineColumn& y) { return x.label < y.label; });
  return v;
}

}  // namespace mlbench::report
