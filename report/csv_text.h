// The CSV writers' cells (csv_reporter.cc, store_csv_reporter.cc): RFC 4180 quoting and
// numbers as the shortest text that reads back as the same double.
#pragma once

#include <cmath>
#include <string>

#include <fmt/format.h>

namespace mlbench::report::csv {

// fmt's "{}" is the shortest text that reads back as the same double: lossless and short; "" for NaN/inf.
inline std::string num(double x) { return std::isfinite(x) ? fmt::format("{}", x) : ""; }

// The cell quoted when it holds a comma, a quote or a newline (quotes doubled).
inline std::string quoted(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace mlbench::report::csv
