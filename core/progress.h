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
// `min_interval`); elsewhere (logs) one line per `step` only, so logs stay short.
// The live line is either the Mila progress line (update) or the caller's own (show).
class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, bool is_terminal, int total, std::string label = {},
                  std::chrono::milliseconds min_interval = std::chrono::milliseconds(100));
  // Reports `done` units; `loss` when known; `line_break` forces a full line (e.g. per repeat).
  void update(int done, std::optional<double> loss = std::nullopt, bool line_break = false);
  // Shows `line` as the live line (terminal only, throttled like update).
  void show(const std::string& line);
  // Prints `line` for good; on a terminal it replaces the live line.
  void print(const std::string& line);
  void finish();
  bool is_terminal() const { return tty_; }

 private:
  void draw_live(const std::string& line);

  std::ostream& out_;
  bool tty_;
  int total_;
  std::string label_;
  std::chrono::milliseconds min_interval_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool live_line_open_ = false;
};

// True when the file descriptor is a terminal.
bool is_terminal(int fd);

}  // namespace mlbench::core
