// The byte-size parser (see byte_size.h).
#include "byte_size.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace mlbench::core {
namespace {

struct Unit {
  std::string_view name;
  double scale;
};

constexpr double kKi = 1024.0;
constexpr double kMi = 1024.0 * kKi;
constexpr double kGi = 1024.0 * kMi;
constexpr double kTi = 1024.0 * kGi;
constexpr Unit kUnits[] = {
    {"", 1.0},    {"B", 1.0}, {"K", kKi},   {"KiB", kKi}, {"M", kMi},  {"MiB", kMi}, {"G", kGi},
    {"GiB", kGi}, {"T", kTi}, {"TiB", kTi}, {"KB", 1e3},  {"MB", 1e6}, {"GB", 1e9},  {"TB", 1e12},
};

}  // namespace

std::uint64_t parse_byte_size(std::string_view text) {
  double value = 0;
  const char* const end = text.data() + text.size();
  // from_chars, unlike stod, takes no leading blanks, '+' or hex floats.
  const auto [rest, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || !std::isfinite(value)) {
    throw std::invalid_argument(fmt::format("'{}' is not a size (e.g. 4096, 512M, 2G, 1.5GiB, 500MB)", text));
  }
  const std::string_view unit(rest, static_cast<std::size_t>(end - rest));
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    if (value < 0) {
      throw std::invalid_argument(fmt::format("'{}': a size cannot be negative", text));
    }
    const double bytes = std::floor(value * u.scale);
    // 2^64 is exact as a double; anything at or above it does not fit.
    if (!(bytes < 18446744073709551616.0)) throw std::invalid_argument(fmt::format("'{}': size too large", text));
    return static_cast<std::uint64_t>(bytes);
  }
  throw std::invalid_argument(
      fmt::format("'{}': unknown size unit '{}' (use B, K/KiB, M/MiB, G/GiB, T/TiB, or KB, MB, GB, TB)", text, unit));
}

}  // namespace mlbench::core
