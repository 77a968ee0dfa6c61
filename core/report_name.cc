// Report file names and UTC timestamps (see report_name.h), through fmt/chrono.h.
#include "report_name.h"

#include <ctime>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace mlbench::core {
namespace {

// The calendar time (UTC) of `when`'s whole second and the microseconds past it.
// fmt 9 formats a system_clock time_point in local time and drops the fraction,
// so the two parts are formatted apart.
struct UtcParts {
  std::tm tm;
  long long micros;
};

UtcParts utc_parts(std::chrono::system_clock::time_point when) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(when);
  return {fmt::gmtime(std::chrono::system_clock::to_time_t(secs)),
          std::chrono::duration_cast<std::chrono::microseconds>(when - secs).count()};
}

}  // namespace

std::string utc_file_timestamp(std::chrono::system_clock::time_point when) {
  const UtcParts p = utc_parts(when);
  return fmt::format("{:%Y%m%d-%H%M%S}-{:06}", p.tm, p.micros);
}

std::string utc_iso8601(std::chrono::system_clock::time_point when) {
  const UtcParts p = utc_parts(when);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:06}Z", p.tm, p.micros);
}

std::string report_file_name(const std::string& suite, const std::string& name, int run_id, int slot, bool failed,
                             std::chrono::system_clock::time_point when) {
  return fmt::format("{}.{}.R{}.D{}{}.{}.json", suite, name, run_id, slot, failed ? ".FAIL" : "",
                     utc_file_timestamp(when));
}

}  // namespace mlbench::core
