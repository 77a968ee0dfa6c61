#include "report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

struct UtcParts {
  std::tm tm;
  long micros;
};

UtcParts utc_parts(std::chrono::system_clock::time_point when) {
  const auto since = when.time_since_epoch();
  const auto secs = std::chrono::floor<std::chrono::seconds>(since);
  const std::time_t t = static_cast<std::time_t>(secs.count());
  UtcParts p{};
  gmtime_r(&t, &p.tm);
  p.micros = static_cast<long>(std::chrono::duration_cast<std::chrono::microseconds>(since - secs).count());
  return p;
}

std::runtime_error io_error(const std::string& what, const std::filesystem::path& path) {
  return std::runtime_error(fmt::format("cannot {} {}: {}", what, path.string(), std::strerror(errno)));
}

}  // namespace

std::string utc_file_timestamp(std::chrono::system_clock::time_point when) {
  const UtcParts p = utc_parts(when);
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}-{:06}", p.tm.tm_year + 1900, p.tm.tm_mon + 1, p.tm.tm_mday,
                     p.tm.tm_hour, p.tm.tm_min, p.tm.tm_sec, p.micros);
}

std::string utc_iso8601(std::chrono::system_clock::time_point when) {
  const UtcParts p = utc_parts(when);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", p.tm.tm_year + 1900, p.tm.tm_mon + 1,
                     p.tm.tm_mday, p.tm.tm_hour, p.tm.tm_min, p.tm.tm_sec, p.micros);
}

std::string report_file_name(const std::string& suite, const std::string& name, int run_id, int slot, bool failed,
                             std::chrono::system_clock::time_point when) {
  return fmt::format("{}.{}.R{}.D{}{}.{}.json", suite, name, run_id, slot, failed ? ".FAIL" : "",
                     utc_file_timestamp(when));
}

void write_file_atomic(const std::filesystem::path& file, const std::string& content) {
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create directory {}: {}", dir.string(), ec.message()));
  // Built piecewise: GCC 12 warns falsely (-Wrestrict) on "." + string.
  std::string tmp_name(".");
  tmp_name += file.filename().string();
  tmp_name += ".XXXXXX";
  std::string tmpl = (dir / tmp_name).string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) throw io_error("create a temporary file in", dir);
  const std::filesystem::path tmp(tmpl);
  auto fail = [&](const char* what) {
    const auto err = io_error(what, tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return err;
  };
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw fail("write");
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) throw fail("chmod");
  if (::fsync(fd) != 0) throw fail("fsync");
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw io_error("close", tmp);
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    const auto err = io_error("rename into place", file);
    ::unlink(tmp.c_str());
    throw err;
  }
}

void write_json_atomic(const std::filesystem::path& file, const nlohmann::json& value) {
  write_file_atomic(file, value.dump(2) + "\n");
}

nlohmann::json train_item(const StatAccumulator& train, double items_per_observation) {
  if (train.count() == 0 || !(train.min() > 0.0)) {
    return {{"avg", nullptr}, {"min", nullptr}, {"max", nullptr}, {"range", nullptr}, {"unit", "items/sec"}};
  }
  const double avg = items_per_observation / train.mean();
  const double max = items_per_observation / train.min();
  const double min = items_per_observation / train.max();
  return {{"avg", avg}, {"min", min}, {"max", max}, {"range", max - min}, {"unit", "items/sec"}};
}

}  // namespace mlbench::core
