#include "exec_target.h"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace mlbench::stall {
namespace fs = std::filesystem;

constexpr int kObservations = 10;  // as plan.cc: 10 timed observations a run
constexpr int kWarmupObservations = 2;

std::vector<RunSpec> plan_exec_runs(const StallConfig& c, const ExecConfig& exec, int pipeline_depth) {
  const int number = std::max(1, (c.iterations + kObservations - 1) / kObservations);
  const int depth_warmup = std::max(kWarmupObservations, (pipeline_depth + number - 1) / number + 1);
  // The compute-only run loads K batches (through the loader, with its start-up) before replaying.
  const int replay_warmup = std::max(depth_warmup, (exec.cache_batches + pipeline_depth + number - 1) / number + 1);
  std::vector<RunSpec> runs;
  const auto add = [&](std::string label, std::string kind, CacheState cache, int warmup) {
    RunSpec r;
    r.label = std::move(label);
    r.kind = std::move(kind);
    r.cache = cache;
    r.command = exec.command;
    r.env = {{"MLBENCH_PROBE_MODE", "normal"},
             {"MLBENCH_PROBE_ITERATIONS", std::to_string(number * kObservations)},
             {"MLBENCH_PROBE_NUMBER", std::to_string(number)},
             {"MLBENCH_PROBE_WARMUP", std::to_string(warmup)}};
    runs.push_back(std::move(r));
    return &runs.back();
  };
  RunSpec* g = add("synthetic", "synthetic", CacheState::Any, replay_warmup);
  g->env["MLBENCH_PROBE_MODE"] = "compute-only";
  g->env["MLBENCH_PROBE_CACHE_BATCHES"] = std::to_string(exec.cache_batches);
  add("cached", "cached", CacheState::Warm, depth_warmup);
  add("cold", "cold", CacheState::Cold, depth_warmup)->env["MLBENCH_PROBE_COLD_DIR"] = fs::absolute(c.data).string();
  for (int n : c.cpus) add(fmt::format("cpus-{}", n), "cpus", CacheState::Warm, depth_warmup)->cpus = n;
  return runs;
}

RunSpec plan_exec_loader_run(const StallConfig& c, int workers, int batch_size) {
  const int number = std::max(1, (c.iterations + kObservations - 1) / kObservations);
  RunSpec r;
  r.label = "mlbench-loader";
  r.kind = "mlbench-loader";
  r.cache = CacheState::Warm;
  // pytorch/examples' ImageNet layout (DIR/train/<class>/..., DIR/val/...), which its script takes
  // as --data DIR: the training images, the ones the script's loader reads, are DIR/train.
  const fs::path train = fs::path(c.data) / "train";
  std::error_code ec;
  r.args = {"--data", fs::is_directory(train, ec) ? train.string() : c.data};
  for (auto& a : iteration_args(c.iterations, std::max(kWarmupObservations, 2 * workers / number + 1))) {
    r.args.push_back(std::move(a));
  }
  for (const std::string& a :
       {std::string("--workers"), std::to_string(std::max(1, workers)), std::string("--batch-size"),
        std::to_string(std::max(1, batch_size)), std::string("--no-cuda")}) {
    r.args.push_back(a);
  }
  return r;
}

core::Environment exec_environment(const RunSpec& spec, const ExecConfig& exec, const fs::path& report_dir,
                                   core::Environment env) {
  for (const auto& [k, v] : spec.env) env[k] = v;
  // Absolute: the command may run in another folder (--exec-workdir).
  env["MLBENCH_PROBE_REPORT"] = fs::absolute(report_dir).string();
  if (!env.count("MLBENCH_PROBE_NAME")) env["MLBENCH_PROBE_NAME"] = "exec";
  const std::string own = (exec.probe_dir / "autoprobe").string() + ":" + exec.probe_dir.string();
  const auto old = env.find("PYTHONPATH");
  env["PYTHONPATH"] = old == env.end() || old->second.empty() ? own : own + ":" + old->second;
  env.erase("OUTPUT_DIRECTORY");  // the report goes to MLBENCH_PROBE_REPORT only
  return env;
}

std::string executable_problem(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return "no such file";
  if (fs::is_directory(st)) return "it is a directory";
  if (::access(path.c_str(), X_OK) != 0) {
    return "the file is not executable (chmod +x it, or give its interpreter first: -- python3 " + path + " ...)";
  }
  return {};
}

std::string find_executable(const std::string& name, const std::string& path) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return name;
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate.string();
  }
  return "";
}

std::string last_lines(const fs::path& file, int lines) {
  std::ifstream in(file);
  std::deque<std::string> kept;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    kept.push_back(line);
    if (static_cast<int>(kept.size()) > lines) kept.pop_front();
  }
  std::string out;
  for (const auto& l : kept) out += (out.empty() ? "" : " | ") + l;
  return out;
}

}  // namespace mlbench::stall
