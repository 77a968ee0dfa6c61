// Instances as Slurm job steps (see slurm_launcher.h).
#include "slurm_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "core/environment.h"
#include "runner_signals.h"

namespace mlbench::runner {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;

namespace {

// How much of a log's end is searched for srun's and slurmstepd's lines.
constexpr std::streamoff kTailBytes = 64 * 1024;

std::string on_path(const std::string& name) {
  std::istringstream path(core::getenv_or("PATH", ""));
  for (std::string dir; std::getline(path, dir, ':');) {
    const fs::path p = fs::path(dir.empty() ? "." : dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0) return p.string();
  }
  throw std::runtime_error("--launcher slurm: '" + name + "' not found on PATH (install slurm-client)");
}

std::string tail_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - kTailBytes));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lines Slurm itself wrote (srun's and slurmstepd's), not the benchmark's.
std::vector<std::string> slurm_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("srun:", 0) == 0 || line.rfind("slurmstepd", 0) == 0) lines.push_back(line);
  }
  return lines;
}

bool any_has(const std::vector<std::string>& lines, const char* what) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

// GPUs the plan gave the instance (its CUDA_VISIBLE_DEVICES list); 0 without.
int gpus_of(const LaunchRequest& r) {
  const auto it = r.env.find("CUDA_VISIBLE_DEVICES");
  if (it == r.env.end() || it->second.empty()) return 0;
  return static_cast<int>(std::count(it->second.begin(), it->second.end(), ',')) + 1;
}

}  // namespace

int SlurmAllocation::total_cpus() const {
  return std::accumulate(cpus_per_node.begin(), cpus_per_node.end(), 0);
}

std::vector<int> parse_cpus_per_node(const std::string& text) {
  const auto bad = [&] {
    return std::invalid_argument("SLURM_JOB_CPUS_PER_NODE '" + text + "': not a list like 4(x2),8");
  };
  std::vector<int> cpus;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    int count = 0, times = 1;
    char rest[8] = {};
    const int n = std::sscanf(item.c_str(), "%d(x%d%7s", &count, &times, rest);
    if (n < 1 || count < 1 || times < 1 || (n == 1 && item.find('(') != std::string::npos) ||
        (n >= 2 && std::string(rest) != ")") || (n == 1 && std::to_string(count) != item)) {
      throw bad();
    }
    cpus.insert(cpus.end(), static_cast<std::size_t>(times), count);
  }
  if (cpus.empty() || text.back() == ',') throw bad();
  return cpus;
}

int slurm_default_slots(const SlurmAllocation& a, int fallback) {
  if (a.ntasks > 0) return a.ntasks;
  if (a.cpus_per_task > 0) return std::max(1, a.total_cpus() / a.cpus_per_task);
  return fallback;
}

std::optional<SlurmAllocation> slurm_allocation(const std::map<std::string, std::string>& env, std::string* why) {
  const auto get = [&](const char* name) {
    const auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  SlurmAllocation a;
  a.job_id = get("SLURM_JOB_ID");
  if (a.job_id.empty()) {
    if (why)
      *why = "not inside a Slurm allocation (SLURM_JOB_ID is unset): run it under salloc or sbatch, or use --sbatch";
    return std::nullopt;
  }
  const std::string cpus = get("SLURM_JOB_CPUS_PER_NODE");
  if (cpus.empty()) {
    if (why)
      *why = "SLURM_JOB_CPUS_PER_NODE is unset: not a job allocation (run mlbench-run in the job, not in a step)";
    return std::nullopt;
  }
  a.cpus_per_node = parse_cpus_per_node(cpus);
  for (auto [name, field] :
       {std::pair<const char*, int*>{"SLURM_NTASKS", &a.ntasks}, {"SLURM_CPUS_PER_TASK", &a.cpus_per_task}}) {
    if (const std::string v = get(name); !v.empty()) {
      try {
        std::size_t used = 0;
        const int n = std::stoi(v, &used);
        if (used != v.size() || n < 1) throw std::invalid_argument(v);
        *field = n;
      } catch (const std::exception&) {
        throw std::invalid_argument(std::string(name) + " '" + v + "': not a number >= 1");
      }
    }
  }
  if (const std::string mem = get("SLURM_MEM_PER_NODE"); !mem.empty()) {
    try {
      a.memory_per_node = std::stoull(mem) << 20;
    } catch (const std::exception&) {
      throw std::invalid_argument("SLURM_MEM_PER_NODE '" + mem + "': not a number of MiB");
    }
  }
  return a;
}

std::vector<std::string> srun_args(const LaunchRequest& r, const SlurmAllocation& a, const std::string& name,
                                   double kill_grace) {
  std::vector<std::string> args = {"--job-name=" + name, "--kill-on-bad-exit=1"};
  const int gpus = gpus_of(r);
  if (r.whole_allocation) {
    // One task per node, each with the node's CPUs (the smallest node's) and memory.
    const int nodes = a.nodes();
    args.push_back(fmt::format("--nodes={}", nodes));
    args.push_back(fmt::format("--ntasks={}", nodes));
    args.push_back("--ntasks-per-node=1");
    args.push_back(
        fmt::format("--cpus-per-task={}", *std::min_element(a.cpus_per_node.begin(), a.cpus_per_node.end())));
    args.push_back("--mem=0");  // all the job's memory on each node
  } else {
    args.push_back("--nodes=1");
    args.push_back("--ntasks=1");
    args.push_back(fmt::format("--cpus-per-task={}", std::max<std::size_t>(1, r.cpus.size())));
    if (r.memory_bytes) args.push_back(fmt::format("--mem={}M", std::max<std::uint64_t>(1, *r.memory_bytes >> 20)));
  }
  if (gpus > 0) args.push_back(fmt::format("--gres=gpu:{}", gpus));
  if (r.timeout > 0) {
    const double minutes = std::ceil((r.timeout + kill_grace) / 60.0) + 1;
    args.push_back(fmt::format("--time={}", static_cast<long long>(std::min(minutes, 1e8))));
  }
  args.push_back("--");
  if (r.whole_allocation && a.nodes() > 1) {
    // Every task runs the benchmark; rank 0's report is the instance's, the others'
    // go to rank<k>/ beside it (kept, not read by mlbench-report).
    args.insert(args.end(),
                {"/bin/sh", "-c",
                 "if [ \"${SLURM_PROCID:-0}\" != 0 ]; then OUTPUT_DIRECTORY=\"$OUTPUT_DIRECTORY/rank$SLURM_PROCID\"; "
                 "export OUTPUT_DIRECTORY; mkdir -p \"$OUTPUT_DIRECTORY\"; fi; exec \"$@\"",
                 "mlbench-task"});
  }
  args.push_back(r.executable);
  args.insert(args.end(), r.argv.begin(), r.argv.end());
  return args;
}

std::string step_state(const std::string& log_tail, bool exited, int exit_code) {
  const std::vector<std::string> lines = slurm_lines(log_tail);
  if (any_has(lines, "Out Of Memory") || any_has(lines, "oom-kill event")) return "OUT_OF_MEMORY";
  if (any_has(lines, "DUE TO TIME LIMIT")) return "TIMEOUT";
  if (any_has(lines, "DUE TO NODE FAILURE") || any_has(lines, "Node failure")) return "NODE_FAIL";
  if (any_has(lines, "DUE TO PREEMPTION")) return "PREEMPTED";
  // slurmstepd's line may not reach the log when the step is cancelled as it starts; srun's does.
  if (any_has(lines, " CANCELLED AT ") || any_has(lines, "srun: Job step aborted") ||
      any_has(lines, "aborted before step completely launched")) {
    return "CANCELLED";
  }
  return exited && exit_code == 0 ? "COMPLETED" : "FAILED";
}

int task_signal(const std::string& log_tail, int srun_exit_code) {
  const int sig = srun_exit_code - 128;
  if (sig <= 0 || sig >= NSIG) return 0;
  const std::string said = ": task ";
  const std::string name = strsignal(sig);
  for (const std::string& line : slurm_lines(log_tail)) {
    const auto at = line.find(said);
    if (at == std::string::npos) continue;
    const auto colon = line.find(": ", at + said.size());
    if (colon != std::string::npos && line.compare(colon + 2, std::string::npos, name) == 0) return sig;
  }
  return 0;
}

std::string step_creation_error(const std::string& log_tail) {
  for (const std::string& line : slurm_lines(log_tail)) {
    if (line.find("Unable to create step") != std::string::npos || line.find("srun: fatal:") == 0) return line;
  }
  return "";
}

SlurmLauncher::SlurmLauncher(SlurmAllocation allocation, double kill_grace)
    : allocation_(std::move(allocation)),
      kill_grace_(kill_grace),
      srun_(on_path("srun")),
      scancel_(on_path("scancel")),
      squeue_(on_path("squeue")) {
  block_runner_signals();
}

SlurmLauncher::~SlurmLauncher() {
  // Steps still running (the runner is leaving early) are cancelled, not left to run on.
  for (Step& step : steps_) {
    if (step.srun && !step.ending && !step.srun->try_wait()) cancel(step, SIGKILL);
  }
}

Launcher::Id SlurmLauncher::start(const LaunchRequest& request) {
  Step& step = steps_.emplace_back();
  step.name = fmt::format("mlbench-{}-{}", getpid(), steps_.size() - 1);
  step.log = request.log;
  step.started = SteadyClock::now();
  step.started_at = SystemClock::now();
  core::ProcessSpec spec;
  spec.executable = srun_;
  spec.args = srun_args(request, allocation_, step.name, kill_grace_);
  spec.env = core::current_environment();
  for (const auto& [k, v] : request.env) (*spec.env)[k] = v;
  // Slurm sets the step's own GPUs; the allocation's memory variables would clash with --mem.
  if (gpus_of(request) > 0) spec.env->erase("CUDA_VISIBLE_DEVICES");
  for (const char* v : {"SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU", "SLURM_MEM_PER_NODE"}) spec.env->erase(v);
  spec.output = core::Output::File;
  spec.log_path = request.log.string();
  // The step as srun was asked for it, under the runner's own header line.
  spec.log_header = request.log_header + "# srun";
  for (const std::string& a : spec.args) spec.log_header += " " + a;
  spec.log_header += "\n";
  try {
    step.srun.emplace(spec);
  } catch (const std::exception& e) {
    Ending ending;
    ending.launch_error = e.what();
    ending.started = ending.ended = step.started_at;
    step.ending = ending;
  }
  return static_cast<Id>(steps_.size() - 1);
}

std::optional<Ending> SlurmLauncher::poll(Id id) {
  Step& step = steps_.at(static_cast<std::size_t>(id));
  if (step.ending) return step.ending;
  const auto status = step.srun->try_wait();
  if (!status) return std::nullopt;
  Ending ending;
  ending.exited = status->exited;
  ending.exit_code = status->code;
  ending.signal = status->signal;
  ending.started = step.started_at;
  ending.wall_seconds = std::chrono::duration<double>(SteadyClock::now() - step.started).count();
  ending.ended = step.started_at +
                 std::chrono::duration_cast<SystemClock::duration>(std::chrono::duration<double>(ending.wall_seconds));
  const std::string tail = tail_of(step.log);
  ending.state = step_state(tail, status->exited, status->code);
  if (status->exited) {
    if (const int sig = task_signal(tail, status->code); sig != 0) {  // the task's death, as locally
      ending.exited = false;
      ending.exit_code = 0;
      ending.signal = sig;
    }
  }
  if (const std::string error = step_creation_error(tail); !error.empty()) ending.launch_error = error;
  if (ending.state == "OUT_OF_MEMORY") ending.oom_kills = 1;
  // srun's own usage says nothing of the step's; Slurm's accounting (sacct) has that.
  ending.resources = core::ResourcesInfo{};
  ending.resources->source = "slurm";
  step.ending = ending;
  return step.ending;
}

std::string SlurmLauncher::find_step_id(Step& step) {
  if (!step.step_id.empty()) return step.step_id;
  core::ProcessSpec spec;
  spec.executable = squeue_;
  spec.args = {"--noheader", "--steps", "--jobs=" + allocation_.job_id, "--format=%i %j"};
  spec.output = core::Output::Capture;
  try {
    const core::CommandResult r = core::run_captured(spec, 30);
    std::istringstream in(r.output);
    for (std::string id, name; in >> id >> name;) {
      if (name == step.name) return step.step_id = id;
    }
  } catch (const core::ProcessError&) {
  }
  return "";
}

void SlurmLauncher::cancel(Step& step, int sig) {
  const std::string id = find_step_id(step);
  if (id.empty()) {
    // Not a step yet (srun still asking for it): stopping srun withdraws the request.
    step.srun->signal_group(sig);
    return;
  }
  core::ProcessSpec spec;
  spec.executable = scancel_;
  spec.args = {id};
  if (sig != SIGKILL) spec.args.insert(spec.args.begin(), "--signal=" + std::to_string(sig));
  spec.output = core::Output::Capture;
  try {
    core::run_captured(spec, 30);  // its complaints (a step that just ended) do not matter
  } catch (const core::ProcessError&) {
    step.srun->signal_group(sig);
  }
}

void SlurmLauncher::signal(Id id, int sig) {
  Step& step = steps_.at(static_cast<std::size_t>(id));
  if (step.srun && !step.ending) cancel(step, sig);
}

int SlurmLauncher::wait(double seconds) {
  return wait_for_runner_signal(seconds);
}

double SlurmLauncher::now() const {
  return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count();
}

}  // namespace mlbench::runner
