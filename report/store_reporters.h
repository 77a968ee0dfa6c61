// The results store's views (report/store_views.h) in every output format, one reporter per
// format as for the reports tree (reporter.h): console, CSV, JSON and one HTML page with a
// trend chart per benchmark. docs/report.md, "The results store", shows each.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/store_views.h"

namespace mlbench::report {

// The version of StoreJsonReporter's layout (docs/report.md, "The results store").
inline constexpr int kStoreViewJsonSchemaVersion = 1;

// What one mlbench-report --store command shows: the history, the machines, or both.
struct StoreView {
  std::string store;  // the store's name (redacted URL or file)
  std::optional<History> history;
  std::optional<MachinesView> machines;
  std::vector<std::string> notes;  // one-line notes (what was imported, what a view could not show)
};

class StoreViewReporter {
 public:
  virtual ~StoreViewReporter() = default;
  virtual void write(const StoreView& view, std::ostream& out) const = 0;
};

// Per series a table of its runs (when, run, passes, items/s with spread, stall %, time per
// item, the change against the runs before it), then its failures; the machines side by side.
class StoreConsoleReporter : public StoreViewReporter {
 public:
  void write(const StoreView& view, std::ostream& out) const override;
};

// The history (one row per run of a series), an empty line, the machines (one row per
// benchmark and machine).
class StoreCsvReporter : public StoreViewReporter {
 public:
  void write(const StoreView& view, std::ostream& out) const override;
};

// Every number of the console view; NaN as null.
class StoreJsonReporter : public StoreViewReporter {
 public:
  void write(const StoreView& view, std::ostream& out) const override;
};

// One self-contained page (no network): per benchmark a trend chart and its runs' table; the
// machines table.
class StoreHtmlReporter : public StoreViewReporter {
 public:
  void write(const StoreView& view, std::ostream& out) const override;
};

nlohmann::json store_view_to_json(const StoreView& view);
// "2026-01-02 03:04" from ISO 8601 "2026-01-02T03:04:05Z" (the text as it is when shorter).
std::string format_when(const std::string& iso);
// "compute 0.90, fetch 0.05, prep 0.05 ms/item" ("-" when not timed).
std::string format_time_split(const TimePerItem& t);

}  // namespace mlbench::report
