// Launching mlbench-datagen for a job's dataset (see datagen.h).
#include "datagen.h"

#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

namespace mlbench::runner {

namespace fs = std::filesystem;

namespace {
std::string last_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}
}  // namespace

fs::path datagen_path(const std::string& runner_dir) { return fs::path(runner_dir) / "mlbench-datagen"; }

std::string datagen_missing(const std::string& dataset, const fs::path& datagen) {
  if (access(datagen.c_str(), X_OK) == 0) return "";
  return "dataset " + dataset + ": mlbench-datagen not found at " + datagen.string() + " (build it)";
}

LaunchRequest datagen_request(const fs::path& datagen, const std::string& dataset, const fs::path& outdir,
                              const std::string& data_dir) {
  LaunchRequest r;
  r.executable = datagen.string();
  r.argv = {"ensure", dataset, "--root", data_dir};
  r.log = outdir / ("datagen." + dataset + ".log");
  r.log_header = "# " + r.executable + " ensure " + dataset + " --root " + data_dir + "\n";
  return r;
}

std::string datagen_failure(const std::string& dataset, const Ending& ending, const fs::path& log) {
  if (!ending.launched()) return "dataset " + dataset + ": " + ending.launch_error;
  if (ending.exited && ending.exit_code == 0) return "";
  std::string why = last_line(log);
  if (why.empty() || why[0] == '#') why = ending.exited ? fmt::format("exit {}", ending.exit_code) : "killed";
  return "dataset " + dataset + ": " + why;
}

}  // namespace mlbench::runner
