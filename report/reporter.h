// One reporter per output format (console, CSV, JSON, HTML) behind one small
// interface, as google/benchmark does; main picks them from the flags.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/statistics.h"
#include "report/report_model.h"

namespace mlbench::report {

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void write(const Report& report, std::ostream& out) const = 0;
};

// The Mila layout: the per-bench table, the Statistics lines, the score line,
// then failures, warnings and the --compare table. Colour only when `color`.
class ConsoleReporter : public Reporter {
 public:
  explicit ConsoleReporter(bool color) : color_(color) {}
  void write(const Report& report, std::ostream& out) const override;

 private:
  bool color_;
};

// Two tables separated by one empty line: per bench (with per-run values), then
// statistic,value,pass (and the --compare table after another empty line).
class CsvReporter : public Reporter {
 public:
  void write(const Report& report, std::ostream& out) const override;
};

// The version of JsonReporter's layout (docs/report.md, "JSON (`--json`)"). 2: `significant` of a
// comparison row is the Mann-Whitney U verdict (was: beyond the combined sd, now `beyond_combined_sd`);
// new per-bench `unstable`, `instability`, `dropped`, `outliers`. Version 1 had no such field.
inline constexpr int kReportJsonSchemaVersion = 2;

// Every number of the console view, per-run values included; NaN as null.
class JsonReporter : public Reporter {
 public:
  void write(const Report& report, std::ostream& out) const override;
};

// One self-contained page (no network): the table, SVG charts, embedded stall charts.
class HtmlReporter : public Reporter {
 public:
  void write(const Report& report, std::ostream& out) const override;
};

// Pieces the reporters share and tests check directly.
// The pandas-style table of the Mila tool ("target result sd sd% diff" and more).
std::string format_bench_table(const Report& report);
// The "Statistics | Value | Pass" block, exactly as in the Mila layout.
std::string format_statistics(const SuiteStatistics& stats, bool color);
// "Score ...": geometric mean of result/target and the failure rate, one line.
std::string format_score_line(const SuiteStatistics& stats);
std::string format_comparison(const Comparison& comparison, bool color);
// items/s in the named-pass lists: whole numbers from 1000 up ("2000000"), else 4 significant digits.
std::string format_items(double items_per_s);
// A p-value as the comparison prints it ("0.0286", "<1e-4", "-" when not tested).
std::string format_p(double p);
// "faster", "no significant difference (needs >= 4 passes a side: ...)".
std::string format_verdict(const CompareRow& row);
// "Unstable ...:" and one line per benchmark whose sd% fails the rule, with its cause; "" when none.
std::string format_instability(const Report& report);
// One line per benchmark naming the passes the trimmed mean drops and the outliers; "" when none.
std::string format_named_passes(const Report& report);
nlohmann::json report_to_json(const Report& report);
// A finite number, or null.
using core::number_or_null;

}  // namespace mlbench::report
