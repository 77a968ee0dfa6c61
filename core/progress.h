// Progress lines in the Mila layout ("[  3/ 15] | ETA:   1.34 min | Batch Loss   6.1524")
// and a generic progress bar with ETA for long work (datagen, sweeps).
#pragma once

#include <chrono>
#include <iosfwd>
#include <optional>
#include <string>

namespace mlbench::core {

// "[  3/ 15] | ETA:   1.34 min | Batch Loss   6.1524" (loss part only when given).
std::string format_progress_line(int done, int total, double eta_seconds, std::optional<double> loss);
// Remaining time when `done` of `total` took `elapsed` seconds (0 when done >= total, NaN when done == 0).
double eta_seconds(int done, int total, double elapsed);
// "12.3 s", "4.56 min", "1.23 h".
std::string format_duration(double seconds);

// Prints progress: on a terminal one live line rewritten in place (at most every
// 100 ms); elsewhere (logs) one line per `step` only, so logs stay short.
class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, bool is_terminal, int total, std::string label = {});
  // Reports `done` units; `loss` when known; `line_break` forces a full line (e.g. per repeat).
  void update(int done, std::optional<double> loss = std::nullopt, bool line_break = false);
  void finish();

 private:
  std::ostream& out_;
  bool tty_;
  int total_;
  std::string label_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool live_line_open_ = false;
};

// True when the file descriptor is a terminal.
bool is_terminal(int fd);

}  // namespace mlbench::core
