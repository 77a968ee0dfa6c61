#include "progress.h"

#include <unistd.h>

#include <cmath>
#include <limits>
#include <ostream>

#include <fmt/format.h>

namespace mlbench::core {

double eta_seconds(int done, int total, double elapsed) {
  if (done >= total) return 0.0;
  if (done <= 0) return std::numeric_limits<double>::quiet_NaN();
  return elapsed / done * (total - done);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "?";
  if (seconds < 60.0) return fmt::format("{:.1f} s", seconds);
  if (seconds < 3600.0) return fmt::format("{:.2f} min", seconds / 60.0);
  return fmt::format("{:.2f} h", seconds / 3600.0);
}

std::string format_progress_line(int done, int total, double eta, std::optional<double> loss) {
  std::string line = fmt::format("[{:3d}/{:3d}] | ETA: {:>6} min", done, total,
                                 std::isfinite(eta) ? fmt::format("{:.2f}", eta / 60.0) : std::string("?"));
  if (loss) line += fmt::format(" | Batch Loss {:8.4f}", *loss);
  return line;
}

bool is_terminal(int fd) { return isatty(fd) == 1; }

ProgressPrinter::ProgressPrinter(std::ostream& out, bool is_terminal, int total, std::string label,
                                 std::chrono::milliseconds min_interval)
    : out_(out), tty_(is_terminal), total_(total), label_(std::move(label)), min_interval_(min_interval),
      start_(std::chrono::steady_clock::now()), last_draw_(start_ - std::chrono::hours(1)) {}

void ProgressPrinter::update(int done, std::optional<double> loss, bool line_break) {
  const auto now = std::chrono::steady_clock::now();
  if (!tty_ && !line_break) return;
  if (tty_ && !line_break && now - last_draw_ < min_interval_) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string line = format_progress_line(done, total_, eta_seconds(done, total_, elapsed), loss);
  if (!label_.empty()) line = label_ + " " + line;
  if (line_break) {
    print(line);
  } else {
    draw_live(line);
  }
}

void ProgressPrinter::show(const std::string& line) {
  const auto now = std::chrono::steady_clock::now();
  if (!tty_ || now - last_draw_ < min_interval_) return;
  last_draw_ = now;
  draw_live(line);
}

void ProgressPrinter::draw_live(const std::string& line) {
  out_ << "\r\033[2K" << line;
  live_line_open_ = true;
  out_.flush();
}

void ProgressPrinter::print(const std::string& line) {
  if (tty_) out_ << "\r\033[2K";
  out_ << line << '\n';
  live_line_open_ = false;
  out_.flush();
}

void ProgressPrinter::finish() {
  if (tty_ && live_line_open_) out_ << '\n';
  live_line_open_ = false;
  out_.flush();
}

}  // namespace mlbench::core
