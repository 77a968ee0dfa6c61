// What the user sees while mlbench-run works: on a terminal one live status line
// (core's ProgressPrinter) under the permanent lines; in a log, only permanent
// lines. The texts themselves come from outcome.h.
#pragma once

#include <iosfwd>
#include <string>

#include "core/progress.h"

namespace mlbench::runner {

class Output {
 public:
  Output(std::ostream& out, bool is_terminal);

  // Logs only: "[2/19] loader: starting 2 instance(s)" (a terminal shows the live line instead).
  void step_started(int index, int total, const std::string& title, int instances);
  // The live line (terminal only): see status_line().
  void status(const std::string& line);
  // "  loader slot 1: FAILED (oom), log: /out/loader.R0.D1.log"
  void instance_failed(const std::string& title, int slot, const std::string& reason, const std::string& log);
  // The first Ctrl-C.
  void interrupted();
  // Any other permanent line (summary lines, messages).
  void line(const std::string& text);

 private:
  core::ProgressPrinter printer_;
};

}  // namespace mlbench::runner
