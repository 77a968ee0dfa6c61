#include "executor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "core/environment.h"
#include "core/loopback_port.h"
#include "core/process.h"
#include "core/stop_signals.h"
#include "core/sysinfo.h"
#include "exec_target.h"
#include "job_watch.h"

namespace mlbench::stall {
namespace fs = std::filesystem;

constexpr double kWarmResidency = 0.98;
constexpr double kColdResidency = 0.05;
constexpr double kKillGrace = 10;      // seconds from SIGTERM to SIGKILL at a timeout
constexpr double kInterruptGrace = 3;  // seconds from the forwarded signal to SIGKILL

Interrupted::Interrupted(int signal, const std::string& label)
    : RunFailed(fmt::format("interrupted by signal {} during run {}; its benchmark was stopped", signal, label)),
      signal_(signal) {}

ProcessExecutor::ProcessExecutor(fs::path bench_exe, fs::path out_dir, std::vector<fs::path> dataset,
                                 bool use_drop_caches, int timeout_s)
    : bench_(std::move(bench_exe)), out_(std::move(out_dir)), dataset_(std::move(dataset)),
      drop_caches_(use_drop_caches), timeout_s_(timeout_s) {}

// Holds `files` in memory for the runs to come: a host that reclaims page cache on its own (a
// VM's proactive reclaim pages out even files read every second; docs/stall.md, "What it
// measures") would make some of a warm run's reads go to storage, and P would be measured low;
// the page-cache check's run would lose its resident share. They are locked when they fit in
// half the memory available and the lock is permitted; once it failed, runs go on unheld.
void ProcessExecutor::hold_in_memory(const std::vector<fs::path>& files) {
  if (pinned_ || !pin_error_.empty()) return;
  std::uint64_t bytes = 0;
  for (const auto& f : files) bytes += fs::file_size(f);
  const std::uint64_t avail = core::memory_available_bytes();
  if (avail > 0 && bytes > avail / 2) {
    pin_error_ = fmt::format("the dataset ({:.0f} MB) is more than half the memory available ({:.0f} MB)", bytes / 1e6,
                             avail / 1e6);
  } else {
    pinned_ = std::make_unique<PinnedFiles>(files);
    if (!pinned_->complete()) {
      pin_error_ = pinned_->error();
      pinned_.reset();
    }
  }
  if (!pin_error_.empty()) {
    std::cerr << "mlbench-stall: note: runs do not hold the dataset in memory (" << pin_error_
              << "): the page cache may give part of it back during a run (see residency_after in stall.json)\n";
  }
}

void ProcessExecutor::prepare_cache(const RunSpec& spec) {
  // What is held is the whole dataset for warm runs, nothing for cold ones (they must be able to
  // evict it) and the resident share for a partial one.
  if (spec.cache != CacheState::Warm || !pinned_whole_) pinned_.reset();
  pinned_whole_ = false;
  if (spec.cache == CacheState::Warm) {
    warm(dataset_);
    hold_in_memory(dataset_);
    pinned_whole_ = pinned_ != nullptr;
    const double f = residency(dataset_).fraction();
    if (f < kWarmResidency) {
      throw RunFailed(fmt::format("run {}: could not make the dataset resident in the page cache ({:.1f}% of its "
                                  "pages after reading it; not enough free memory?)",
                                  spec.label, 100 * f));
    }
  } else if (spec.cache == CacheState::Partial) {
    // A fixed subset (every file whose index falls in the fraction's share of a seeded order), so
    // that rounds measure the same state.
    evict(dataset_);
    std::vector<std::size_t> order(dataset_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin(), order.end(), std::mt19937_64(0x9a9e));
    const auto n = static_cast<std::size_t>(std::lround(spec.cache_frac * static_cast<double>(dataset_.size())));
    std::vector<fs::path> part;
    for (std::size_t i = 0; i < n && i < order.size(); ++i) part.push_back(dataset_[order[i]]);
    warm(part);
    hold_in_memory(part);
    const double f = residency(dataset_).fraction();
    if (std::abs(f - spec.cache_frac) > 0.1) {
      throw RunFailed(fmt::format("run {}: could not make {:.0f}% of the dataset resident in the page cache ({:.1f}% "
                                  "of its pages after reading that share)",
                                  spec.label, 100 * spec.cache_frac, 100 * f));
    }
  } else if (spec.cache == CacheState::Cold) {
    if (drop_caches_ && !drop_caches()) {
      throw RunFailed("--drop-caches: cannot write /proc/sys/vm/drop_caches (needs root)");
    }
    evict(dataset_);
    const double f = residency(dataset_).fraction();
    if (f > kColdResidency) {
      throw RunFailed(fmt::format("run {}: could not evict the dataset from the page cache ({:.1f}% of its pages "
                                  "still resident; is it on tmpfs?)",
                                  spec.label, 100 * f));
    }
  }
}

namespace {
// The rank a report is of: its `rank` block's (the --exec probe's), else none.
std::optional<int> report_rank(const fs::path& file) {
  std::ifstream in(file);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("rank") || !j["rank"].is_object()) return std::nullopt;
  const auto& r = j["rank"];
  if (!r.contains("rank") || !r["rank"].is_number_integer()) return std::nullopt;
  return r["rank"].get<int>();
}

RunOutcome read_one(const fs::path& file, const std::string& label);
}  // namespace

RunOutcome read_outcome(const fs::path& dir, const std::string& label) {
  std::vector<fs::path> reports;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json") reports.push_back(e.path());
  }
  if (reports.empty()) throw RunFailed(fmt::format("run {} wrote no report", label));
  std::sort(reports.begin(), reports.end());
  // Each rank's latest report (by name: its start time); a report without the block is rank 0's.
  std::map<int, fs::path> by_rank;
  for (const auto& f : reports) by_rank[report_rank(f).value_or(0)] = f;
  if (by_rank.size() < 2) return read_one(reports.back(), label);
  std::vector<RunOutcome> ranks;
  for (const auto& [rank, file] : by_rank) ranks.push_back(read_one(file, fmt::format("{} rank {}", label, rank)));
  // The job's rate is its slowest rank's (a synchronous job steps at its pace); its report, the
  // one the analysis reads the loop's wait from, that of the rank that waited longest for data
  // (the others' wait for it is at their collectives).
  const auto wait_of = [](const RunOutcome& o) {
    const auto r = o.record();
    return r.stall && r.stall->wait && r.stall->wait->avg ? *r.stall->wait->avg : 0.0;
  };
  const auto slowest =
      std::min_element(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.rate < b.rate; });
  const auto latest = std::max_element(ranks.begin(), ranks.end(),
                                       [&](const auto& a, const auto& b) { return wait_of(a) < wait_of(b); });
  RunOutcome out = *latest;
  out.rate = slowest->rate;
  out.rate_from = slowest->rate_from;
  out.cv = slowest->cv;
  out.observations = slowest->observations;
  out.ranks = std::move(ranks);
  return out;
}

namespace {
RunOutcome read_one(const fs::path& file, const std::string& label) {
  RunOutcome out;
  out.report_path = file;
  std::ifstream in(out.report_path);
  core::InstanceReport r;
  try {
    out.report = nlohmann::json::parse(in);
    r = core::parse_instance_report(out.report);
  } catch (const nlohmann::json::exception& e) {
    throw RunFailed(fmt::format("run {}: unreadable report {}: {}", label, out.report_path.string(), e.what()));
  } catch (const core::ReportFormatError& e) {
    throw RunFailed(fmt::format("run {}: report {}: {}", label, out.report_path.string(), e.what()));
  }
  if (!r.completed) {
    throw RunFailed(fmt::format("run {} failed: {}", label, r.reason.empty() ? "unknown reason" : r.reason));
  }
  if (!r.train_item || !r.train_item->avg || !r.train || !r.train->avg) {
    throw RunFailed(fmt::format("run {}: report {} has no throughput", label, out.report_path.string()));
  }
  out.rate = *r.train_item->avg;
  out.cv = r.train->sd ? *r.train->sd / *r.train->avg : 0.0;
  out.observations = std::max<int>(1, static_cast<int>(r.train->count));
  if (const auto median = median_observation_rate(r)) {
    out.rate_from = fmt::format(
        "median observation (the slowest took {:.1f}x the median: a stall of the host; "
        "mean of the observations {:.1f}/s)",
        *r.stability->max_s / *r.stability->median_s, out.rate);
    out.rate = *median;
  }
  return out;
}
}  // namespace

std::optional<double> median_observation_rate(const nlohmann::json& report) {
  try {
    return median_observation_rate(core::parse_instance_report(report));
  } catch (const core::ReportFormatError&) {
    return std::nullopt;
  }
}

std::optional<double> median_observation_rate(const core::InstanceReport& r) {
  if (!r.stability || !r.number || !r.batch_size || !r.train || !r.train_item) return std::nullopt;
  const auto median_s = r.stability->median_s, max_s = r.stability->max_s;
  const auto fastest_s = r.train->min, fastest_rate = r.train_item->max;
  if (!median_s || !max_s || !fastest_s || !fastest_rate) return std::nullopt;
  if (r.stability->observations < 3 || !(*median_s > 0) || !(*max_s > 2 * *median_s)) return std::nullopt;
  const double items = static_cast<double>(*r.number) * static_cast<double>(*r.batch_size);
  if (!(*fastest_s > 0) || std::abs(items / *fastest_s - *fastest_rate) > 0.02 * *fastest_rate) return std::nullopt;
  return items / *median_s;
}

namespace {
// The benchmark on the first spec.cpus CPUs, its report into `report_dir` only, output into `log`.
core::ProcessSpec bench_process(const fs::path& bench, const RunSpec& spec, const fs::path& report_dir,
                                const fs::path& log) {
  core::ProcessSpec process;
  process.executable = bench.string();
  process.args = spec.args;
  process.args.push_back("--report");
  process.args.push_back(report_dir.string());
  process.cpus = core::affinity_cpus();
  if (spec.cpus > 0 && spec.cpus < static_cast<int>(process.cpus.size())) {
    process.cpus.resize(static_cast<std::size_t>(spec.cpus));
  }
  process.env = core::current_environment();
  process.env->erase("OUTPUT_DIRECTORY");  // the report goes to --report only
  (*process.env)["CPU_COUNT"] = std::to_string(process.cpus.size());
  process.output = core::Output::File;
  process.log_path = log.string();
  return process;
}

// --exec: the user's command, with the probe's environment, on the CPUs of the run.
core::ProcessSpec command_process(const ExecConfig& exec, const RunSpec& spec, const fs::path& report_dir,
                                  const fs::path& log) {
  core::ProcessSpec process = bench_process("", spec, report_dir, log);
  process.executable = find_executable(spec.command.front(), core::getenv_or("PATH", "/usr/bin:/bin"));
  process.args.assign(spec.command.begin() + 1, spec.command.end());
  process.env = exec_environment(spec, exec, report_dir, *process.env);
  return process;
}

// After a stop signal was forwarded to `child`'s group: gives it kInterruptGrace seconds (none
// when it had already ended), kills the group, reaps it, and kills what it left behind.
void reap_after_signal(core::Process& child, bool ended) {
  if (!ended && !child.wait_for(kInterruptGrace)) child.signal_group(SIGKILL);
  child.wait();
  core::signal_process_group(child.pid(), SIGKILL);  // what it started and left behind
}

bool has_report(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json") return true;
  }
  return false;
}
}  // namespace

void ProcessExecutor::run_commands(const ExecConfig& exec) {
  exec_ = std::make_shared<const ExecConfig>(exec);
}

void ProcessExecutor::isolate(std::shared_ptr<const IsolationPlan> plan) {
  isolation_ = std::move(plan);
}

RunOutcome ProcessExecutor::command_outcome(const RunSpec& spec, const core::ExitStatus& status,
                                            const fs::path& report_dir, const fs::path& log) {
  const fs::path probe_log = report_dir / "probe.log";
  std::optional<RunOutcome> read;
  std::string why;
  try {
    read = read_outcome(report_dir, spec.label);
  } catch (const RunFailed& e) {
    why = e.what();
  }
  if (!status.exited || status.code != 0) {
    // The script's own failure first (its last line is usually the exception), then what it measured.
    std::vector<fs::path> reports;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(report_dir, ec)) {
      if (e.path().extension() == ".json") reports.push_back(e.path());
    }
    const std::string so_far =
        reports.empty() ? std::string("none (no iteration was probed)") : reports.back().string();
    throw RunFailed(fmt::format("run {}: the command {} ({}); report so far: {} (log: {})", spec.label,
                                status.exited ? fmt::format("exited with status {}", status.code)
                                              : fmt::format("died of signal {}", status.signal),
                                last_lines(log, 1), so_far, log.string()));
  }
  if (!read) {
    std::error_code ec;
    if (!has_report(report_dir) && !fs::exists(probe_log, ec)) {
      // The probe logs at exit whenever it loaded: it never did (python -I, -E or -S ignore the
      // PYTHONPATH and sitecustomize that load it), which is not the script's doing.
      throw RunFailed(
          fmt::format("run {}: the probe never loaded in the command (it wrote no probe log): mlbench-stall loads it "
                      "into Python through PYTHONPATH (probe/autoprobe/sitecustomize.py), which python's -I, -E and "
                      "-S ignore; run the command without them, or import mlbench_probe in the script and wrap its "
                      "loader: loader = mlbench_probe.wrap(loader) (log: {})",
                      spec.label, log.string()));
    }
    if (!has_report(report_dir)) {
      throw RunFailed(
          fmt::format("run {}: the command ended without iterating a DataLoader, so the probe measured "
                      "nothing (probe log: {}); a script with its own batch iterator needs one line: "
                      "loader = mlbench_probe.wrap(loader) (log: {})",
                      spec.label, last_lines(probe_log, 3), log.string()));
    }
    throw RunFailed(fmt::format("{} (probe log: {}; log: {})", why, last_lines(probe_log, 2), log.string()));
  }
  return *read;
}

RunOutcome combine_nodes(std::vector<RunOutcome> nodes) {
  if (nodes.empty()) throw RunFailed("a run of several nodes had none");
  RunOutcome out;
  out.report = nodes.front().report;
  out.report_path = nodes.front().report_path;
  out.log_path = nodes.front().log_path;
  out.observations = nodes.front().observations;
  double rate = 0, cv = 0, user = 0, sys = 0, wall = 0, per_item = 0;
  bool cpu = true;
  for (const auto& n : nodes) {
    rate += n.rate;
    cv = std::max(cv, n.cv);
    const auto c = n.record().process_cpu;
    if (c && c->per_item_us && c->user_s && c->sys_s && c->wall_s) {
      user += *c->user_s;
      sys += *c->sys_s;
      wall = std::max(wall, *c->wall_s);
      per_item += *c->per_item_us;
    } else {
      cpu = false;
    }
  }
  const double count = static_cast<double>(nodes.size());
  out.rate = rate / count;
  out.cv = cv;
  if (cpu) {
    out.report["process_cpu"] = {{"user_s", user},
                                 {"sys_s", sys},
                                 {"wall_s", wall},
                                 {"busy_cpus", wall > 0 ? (user + sys) / wall : 0.0},
                                 {"per_item_us", per_item / count},
                                 {"nodes", nodes.size()}};
  } else {
    out.report["process_cpu"] = nullptr;
  }
  out.nodes = std::move(nodes);
  return out;
}

RunOutcome ProcessExecutor::run_nodes(const RunSpec& spec) {
  const fs::path report_dir = out_ / "runs" / spec.label;
  fs::remove_all(report_dir);
  fs::create_directories(report_dir);
  prepare_cache(spec);
  const Residency before = residency(dataset_);
  const bool held = pinned_ != nullptr;
  std::string peers;
  // Held until the nodes have ended: a port let go can be picked again, and of two nodes given one
  // port the second could not listen (core/loopback_port.h).
  std::vector<core::HeldLoopbackPort> ports;
  if (spec.peers) {
    for (int r = 0; r < spec.nodes; ++r) {
      try {
        ports.emplace_back();
      } catch (const std::runtime_error& e) {
        throw RunFailed(fmt::format("run {}: {}", spec.label, e.what()));
      }
      peers += fmt::format("{}127.0.0.1:{}", r ? "," : "", ports.back().port());
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const core::StopSignals forwarded(core::StopSignals::Calls::kInterrupt);
  std::vector<core::Process> children;
  children.reserve(static_cast<std::size_t>(spec.nodes));
  std::vector<fs::path> dirs, logs;
  for (int r = 0; r < spec.nodes; ++r) {
    dirs.push_back(report_dir / fmt::format("node{}", r));
    logs.push_back(out_ / "runs" / fmt::format("{}.node{}.log", spec.label, r));
    fs::create_directories(dirs.back());
    RunSpec node = spec;
    if (spec.peers) node.args.insert(node.args.end(), {"--peers", peers, "--rank", std::to_string(r)});
    try {
      children.emplace_back(bench_process(bench_, node, dirs.back(), logs.back()));
    } catch (const core::ProcessError& e) {
      throw RunFailed(fmt::format("cannot execute {}", e.what()));
    }
  }
  std::vector<std::optional<core::ExitStatus>> status(children.size());
  const auto all_done = [&] {
    return std::all_of(status.begin(), status.end(), [](const auto& s) { return s.has_value(); });
  };
  while (!all_done() && !core::stop_signal()) {
    const double left = timeout_s_ - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (left <= 0) break;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (!status[i]) status[i] = children[i].wait_for(std::min(left, 0.05 / static_cast<double>(children.size())));
    }
  }
  if (const int sig = core::stop_signal()) {
    for (auto& c : children) c.signal_group(sig);
    for (std::size_t i = 0; i < children.size(); ++i) reap_after_signal(children[i], status[i].has_value());
    throw Interrupted(sig, spec.label);
  }
  if (!all_done()) {
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (!status[i]) status[i] = children[i].stop(kKillGrace);
    }
    throw RunFailed(fmt::format("run {} timed out after {} s (logs: {})", spec.label, timeout_s_,
                                (out_ / "runs" / (spec.label + ".node*.log")).string()));
  }
  for (auto& c : children) core::signal_process_group(c.pid(), SIGKILL);  // what the nodes left running
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<RunOutcome> nodes;
  for (std::size_t i = 0; i < children.size(); ++i) {
    const auto& st = *status[i];
    if (!st.exited) {
      throw RunFailed(
          fmt::format("run {}: node {} died of signal {} (log: {})", spec.label, i, st.signal, logs[i].string()));
    }
    if (st.code != 0) {
      throw RunFailed(fmt::format("run {}: node {} exited with status {}: {} (log: {})", spec.label, i, st.code,
                                  last_lines(logs[i], 1), logs[i].string()));
    }
    nodes.push_back(read_outcome(dirs[i], fmt::format("{} node {}", spec.label, i)));
    nodes.back().log_path = logs[i];
  }
  RunOutcome out = combine_nodes(std::move(nodes));
  out.before = before;
  out.after = residency(dataset_);
  out.held = held;
  out.wall_s = wall;
  return out;
}

RunOutcome ProcessExecutor::run(const RunSpec& spec) {
  RunOutcome out = run_one(spec);
  out.spec = spec;
  return out;
}

namespace {
std::string last_nonempty_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}
}  // namespace

RunOutcome ProcessExecutor::run_one(const RunSpec& spec) {
  if (spec.nodes > 1) return run_nodes(spec);
  const fs::path report_dir = out_ / "runs" / spec.label;
  const fs::path log = out_ / "runs" / (spec.label + ".log");
  fs::remove_all(report_dir);
  fs::create_directories(report_dir);
  prepare_cache(spec);
  const Residency before = residency(dataset_);
  const bool held = pinned_ != nullptr;

  const auto t0 = std::chrono::steady_clock::now();
  // While the benchmark runs, SIGINT/SIGTERM/SIGHUP are caught and forwarded to its process
  // group (which the terminal's Ctrl-C does not reach); EINTR ends the short waits at once.
  const core::StopSignals forwarded(core::StopSignals::Calls::kInterrupt);
  const bool command = exec_ && !spec.command.empty();
  // The command's writes kept from the user's files (stall/exec_isolation.h), and listed once the
  // run is over, however it ended: `listed` is destroyed after `child`, whose end kills its group.
  std::optional<RunIsolation> isolation;
  if (command && isolation_) isolation.emplace(isolation_, out_ / "runs" / (spec.label + ".writes"));
  struct AtEnd {
    std::function<void()> f;
    ~AtEnd() { f(); }
  } listed{[&] {
    try {
      if (isolation) writes_.add(spec.label, isolation->writes());
    } catch (const std::exception& e) {
      std::cerr << "mlbench-stall: warning: run " << spec.label << ": cannot list what it wrote: " << e.what() << "\n";
    }
  }};
  std::optional<core::Process> child;
  try {
    if (command) {
      core::ProcessSpec process = command_process(*exec_, spec, report_dir, log);
      if (isolation) isolation->apply(process);
      child.emplace(process);
    } else {
      child.emplace(bench_process(bench_, spec, report_dir, log));
    }
  } catch (const core::ProcessError& e) {
    throw RunFailed(fmt::format("cannot execute {}", e.what()));
  }
  std::optional<core::ExitStatus> status;
  // A job's ranks, watched (stall/job_watch.h): a fault stops every process of the job, writes a
  // FAIL record in the run's folder and fails the run with one line.
  std::optional<JobWatch> watch;
  if (command) watch.emplace(report_dir, spec.command, exec_->probe_timeout_s);
  const auto started = std::chrono::system_clock::now();
  const auto job_failed = [&](const JobFault& f, pid_t root) {
    const auto stopped = stop_job(root, watch->local_pids());
    if (root > 0) child->wait();
    const fs::path record = write_fail_record(report_dir, f.line, f.record, stopped, started);
    const std::string stop = stopped.empty() ? "no process of the job was left running"
                             : fmt::format("every process of the job was stopped ({} process{})", stopped.size(),
                                           stopped.size() == 1 ? "" : "es");
    return RunFailed(fmt::format("run {}: {}; {}; FAIL record: {} (log: {})", spec.label, f.line, stop,
                                 record.string(), log.string()));
  };
  // Short waits, so a stop signal is forwarded at once.
  while (!status && !core::stop_signal()) {
    const double left = timeout_s_ - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (left <= 0) break;
    status = child->wait_for(std::min(left, 0.05));
    if (!status && watch) {
      if (const auto fault = watch->poll(timeout_s_ - left)) throw job_failed(*fault, child->pid());
    }
    if (!status && command && timeout_s_ - left > exec_->probe_timeout_s && !has_report(report_dir) &&
        !watch->several_ranks()) {
      child->stop(kKillGrace);
      throw RunFailed(
          fmt::format("run {}: the command iterated no DataLoader in {} s, so the probe wrote no report "
                      "(probe log: {}); a script with its own batch iterator needs one line: "
                      "loader = mlbench_probe.wrap(loader) (log: {})",
                      spec.label, exec_->probe_timeout_s, last_lines(report_dir / "probe.log", 3), log.string()));
    }
  }
  if (const int sig = core::stop_signal()) {
    child->signal_group(sig);
    reap_after_signal(*child, false);
    throw Interrupted(sig, spec.label);
  }
  const bool timed_out = !status;
  if (timed_out) status = child->stop(kKillGrace);
  // The run is over: what the command started in its process group and left running
  // (DataLoader workers, a server it spawned) ends with it, as on Ctrl-C.
  core::signal_process_group(child->pid(), SIGKILL);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (timed_out) throw RunFailed(fmt::format("run {} timed out after {} s (log: {})", spec.label, timeout_s_, log.string()));
  if (!status->exited && !command) {
    throw RunFailed(fmt::format("run {} died of signal {} (log: {})", spec.label, status->signal, log.string()));
  }
  const auto finished = [&](RunOutcome out) {
    out.before = before;
    out.after = residency(dataset_);
    out.held = held;
    out.wall_s = wall;
    out.log_path = log;
    return out;
  };
  if (command) {
    if (const auto fault = watch->after_exit(*status, log)) throw job_failed(*fault, 0);
    return finished(command_outcome(spec, *status, report_dir, log));
  }
  const int code = status->code;
  if (code == 127) throw RunFailed(fmt::format("cannot execute {}", bench_.string()));
  // A usage error: show the benchmark's own line.
  if (code == 2) throw RunFailed(fmt::format("run {}: {}", spec.label, last_nonempty_line(log)));
  try {
    return finished(read_outcome(report_dir, spec.label));
  } catch (const RunFailed& e) {
    throw RunFailed(fmt::format("{} (exit {}, log: {})", e.what(), code, log.string()));
  }
}

RunOutcome direct_read_outcome(double samples_per_s, const std::string& what) {
  RunOutcome out;
  out.rate = samples_per_s;
  // No pipeline of its own (the source says where the rate came from), no per-iteration stall.
  out.report = {{"pipeline", {{"source", what}}}, {"stall", nullptr}, {"completed", true}};
  return out;
}

}  // namespace mlbench::stall
