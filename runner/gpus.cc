// GPU detection (see gpus.h).
#include "gpus.h"

#include <unistd.h>

#include <sstream>
#include <string>

#include "core/environment.h"
#include "core/process.h"
#include "core/sysinfo.h"

namespace mlbench::runner {

namespace {
// nvidia-smi's path on PATH, or "" (no process is started on machines without it).
std::string find_nvidia_smi() {
  std::istringstream path(core::getenv_or("PATH", ""));
  for (std::string dir; std::getline(path, dir, ':');) {
    if (!dir.empty() && access((dir + "/nvidia-smi").c_str(), X_OK) == 0) return dir + "/nvidia-smi";
  }
  return "";
}
}  // namespace

int gpu_count() {
  const auto names = core::gpu_names();
  if (!names.empty()) return static_cast<int>(names.size());
  const std::string smi = find_nvidia_smi();
  if (smi.empty()) return 0;
  core::ProcessSpec spec;
  spec.executable = smi;
  spec.args = {"-L"};
  std::string output;
  try {
    output = core::run_captured(spec).output;
  } catch (const core::ProcessError&) {
    return 0;
  }
  int n = 0;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) n += line.rfind("GPU ", 0) == 0;
  return n;
}

}  // namespace mlbench::runner
