// The runner's console output (see output.h).
#include "output.h"

#include <chrono>

#include <fmt/format.h>

namespace mlbench::runner {

// The live line is redrawn about twice a second: often enough to watch, rarely enough for a slow terminal.
constexpr std::chrono::milliseconds kRedrawInterval{450};

Output::Output(std::ostream& out, bool is_terminal) : printer_(out, is_terminal, 0, {}, kRedrawInterval) {}

void Output::step_started(int index, int total, const std::string& title, int instances) {
  if (!printer_.is_terminal()) line(fmt::format("[{}/{}] {}: starting {} instance(s)", index, total, title, instances));
}

void Output::status(const std::string& text) { printer_.show(text); }

void Output::instance_failed(const std::string& title, int slot, const std::string& reason, const std::string& log) {
  line(fmt::format("  {} slot {}: FAILED ({}), log: {}", title, slot, reason, log));
}

void Output::interrupted() {
  line("mlbench-run: interrupted; stopping the running instances (Ctrl-C again to kill them now)");
}

void Output::line(const std::string& text) { printer_.print(text); }

}  // namespace mlbench::runner
