// The watch of a distributed job's ranks under --exec (see job_watch.h).
#include "job_watch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/report_name.h"
#include "core/sysinfo.h"

namespace mlbench::stall {
namespace fs = std::filesystem;

namespace {

// /proc/<pid>/stat: whether the process exists, its state, parent, start time and (a zombie's)
// exit status.
struct ProcStat {
  char state = '?';
  int ppid = 0;
  long long start_ticks = -1;
  int exit_code = -1;
};
std::optional<ProcStat> proc_stat(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string s;
  if (!std::getline(in, s)) return std::nullopt;
  const auto close = s.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(s.substr(close + 2));
  std::vector<std::string> f;
  for (std::string x; fields >> x;) f.push_back(x);
  ProcStat st;
  if (f.size() < 20) return std::nullopt;
  st.state = f[0].empty() ? '?' : f[0][0];
  st.ppid = std::atoi(f[1].c_str());
  st.start_ticks = std::atoll(f[19].c_str());
  if (f.size() >= 50) st.exit_code = std::atoi(f[49].c_str());  // field 52 (Linux 3.5 and later)
  return st;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  }
  return out;
}

std::string where(const std::string& stage) {
  if (stage == "init_process_group") return "stuck in init_process_group (waiting for its peers)";
  if (stage == "initialized") return "stuck after init_process_group, before its first batch";
  return "stuck before its first batch";
}

// The command's own last line: the last non-empty one not the probe's (the launcher's probe logs
// at its exit, after the launcher's own exception).
std::string last_own_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty() && line.rfind("mlbench_probe", 0) != 0) last = line;
  }
  return last;
}

bool is_shell(const std::string& name) {
  return name == "sh" || name == "bash" || name == "dash" || name == "zsh";
}

}  // namespace

std::string launcher_of(const std::vector<std::string>& command) {
  if (command.empty()) return "";
  const std::string exe = fs::path(command[0]).filename().string();
  for (const char* known : {"torchrun", "srun", "mpirun", "mpiexec", "deepspeed", "accelerate", "horovodrun"}) {
    if (exe == known) return known;
  }
  for (std::size_t i = 1; i + 1 < command.size(); ++i) {
    if (command[i] == "-m" && exe.rfind("python", 0) == 0) {
      const std::string& m = command[i + 1];
      if (m.rfind("torch.distributed.", 0) == 0 || m == "torchrun") return m;
      break;
    }
  }
  if (is_shell(exe)) {
    for (const auto& a : command) {
      if (a.find("RANK=") != std::string::npos) return "the shell command (ranks started by hand)";
    }
  }
  for (const auto& a : command) {
    for (const char* flag : {"--nproc_per_node", "--nproc-per-node", "--nnodes"}) {
      if (a.rfind(flag, 0) == 0) {
        std::string named = exe;
        for (std::size_t i = 1; i < command.size() && exe.rfind("python", 0) == 0; ++i) {
          if (!command[i].empty() && command[i][0] != '-') {
            named = fs::path(command[i]).filename().string();
            break;
          }
        }
        return fmt::format("{} (a launcher: {})", named, flag);
      }
    }
  }
  return "";
}

JobWatch::JobWatch(fs::path report_dir, std::vector<std::string> command, double never_iterated_s, double death_grace_s)
    : dir_(std::move(report_dir)),
      command_(std::move(command)),
      never_iterated_s_(never_iterated_s),
      death_grace_s_(death_grace_s),
      host_(core::hostname()) {}

void JobWatch::scan() {
  last_scan_ = std::chrono::steady_clock::now();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_ / "ranks", ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer()) continue;
    Seen& s = seen_[name];
    Announced& a = s.a;
    a.pid = j["pid"].get<int>();
    a.ppid = j.contains("ppid") && j["ppid"].is_number_integer() ? j["ppid"].get<int>() : 0;
    a.host = j.value("host", "");
    a.start_ticks =
        j.contains("start_ticks") && j["start_ticks"].is_number_integer() ? j["start_ticks"].get<long long>() : -1;
    a.rank =
        j.contains("rank") && j["rank"].is_number_integer() ? std::optional<int>(j["rank"].get<int>()) : std::nullopt;
    a.world_size = j.contains("world_size") && j["world_size"].is_number_integer()
                       ? std::optional<int>(j["world_size"].get<int>())
                       : std::nullopt;
    a.launcher = j.contains("launcher") && j["launcher"].is_string() ? j["launcher"].get<std::string>() : "";
    if (!a.launcher.empty()) a.rank.reset();
    a.from = j.contains("from") && j["from"].is_string() ? j["from"].get<std::string>() : "";
    a.stage = j.contains("stage") && j["stage"].is_string() ? j["stage"].get<std::string>() : "";
    a.reason = j.contains("reason") && j["reason"].is_string() ? j["reason"].get<std::string>() : "";
    a.report = j.contains("report") && j["report"].is_string() ? j["report"].get<std::string>() : "";
    a.completed = j.contains("completed") && j["completed"].is_boolean()
                      ? std::optional<bool>(j["completed"].get<bool>())
                      : std::nullopt;
    a.failed_pid = j.contains("failed_pid") && j["failed_pid"].is_number_integer() ? j["failed_pid"].get<int>() : 0;
    a.failed_exitcode = j.contains("failed_exitcode") && j["failed_exitcode"].is_number_integer()
                            ? std::optional<int>(j["failed_exitcode"].get<int>())
                            : std::nullopt;
    a.started = j.contains("started") && j["started"].is_number() ? j["started"].get<double>() : 0.0;
    a.since = j.contains("since") && j["since"].is_number() ? j["since"].get<double>() : 0.0;
  }
  // A process whose child was announced is their launcher (srun's task running torchrun: its
  // SLURM_PROCID made it a rank), not a rank.
  for (auto& [name, s] : seen_) {
    for (const auto& [other, c] : seen_) {
      if (c.a.rank && c.a.ppid == s.a.pid && c.a.host == s.a.host && s.a.rank) {
        s.a.rank.reset();
        s.a.launcher = "the launcher of ranks " + std::to_string(*c.a.rank);
      }
    }
  }
  for (auto& [name, s] : seen_) {
    if (s.gone || s.a.host != host_) continue;  // a rank of another node is not watched from here
    const auto st = proc_stat(s.a.pid);
    bool gone = !st || (s.a.start_ticks >= 0 && st->start_ticks != s.a.start_ticks);
    if (st && !gone && st->state == 'Z') {
      gone = true;
      if (st->exit_code >= 0) {
        s.ended = WIFSIGNALED(st->exit_code) ? fmt::format("killed by signal {}", WTERMSIG(st->exit_code))
                                             : fmt::format("exited with status {}", WEXITSTATUS(st->exit_code));
      }
    }
    if (gone) {
      s.gone = true;
      s.gone_at = last_scan_;
    }
  }
}

bool JobWatch::any_rank() const {
  return std::any_of(seen_.begin(), seen_.end(), [](const auto& kv) { return kv.second.a.rank.has_value(); });
}

bool JobWatch::several_ranks() const {
  std::set<int> ranks;
  int world = 0;
  for (const auto& [name, s] : seen_) {
    if (!s.a.rank) continue;
    ranks.insert(*s.a.rank);
    world = std::max(world, s.a.world_size.value_or(0));
  }
  return ranks.size() > 1 || world > 1;
}

std::vector<int> JobWatch::local_pids() const {
  std::vector<int> pids;
  for (const auto& [name, s] : seen_) {
    if (s.a.host != host_) continue;
    const auto st = proc_stat(s.a.pid);
    if (st && (s.a.start_ticks < 0 || st->start_ticks == s.a.start_ticks)) pids.push_back(s.a.pid);
  }
  return pids;
}

nlohmann::json JobWatch::ranks_json(const std::vector<const Seen*>& which) const {
  nlohmann::json out = nlohmann::json::array();
  for (const Seen* s : which) {
    const Announced& a = s->a;
    out.push_back({{"rank", a.rank ? nlohmann::json(*a.rank) : nlohmann::json()},
                   {"pid", a.pid},
                   {"host", a.host},
                   {"from", a.from},
                   {"stage", a.stage},
                   {"ended", s->ended.empty() ? nlohmann::json() : nlohmann::json(s->ended)},
                   {"reason", a.reason.empty() ? nlohmann::json() : nlohmann::json(a.reason)},
                   {"report", a.report.empty() ? nlohmann::json() : nlohmann::json(a.report)}});
  }
  return out;
}

std::optional<JobFault> JobWatch::restarted() const {
  std::vector<const Seen*> ranks;
  for (const auto& [name, s] : seen_) {
    if (s.a.rank) ranks.push_back(&s);
  }
  std::sort(ranks.begin(), ranks.end(), [](const Seen* x, const Seen* y) { return x->a.started < y->a.started; });
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    for (std::size_t k = i + 1; k < ranks.size(); ++k) {
      const Announced &a = ranks[i]->a, &b = ranks[k]->a;
      // A spawned rank's index is its rank only on its own node until init_process_group says.
      const bool tentative = a.from == "mp.spawn" || b.from == "mp.spawn";
      if (*a.rank != *b.rank || (a.host == b.host && a.pid == b.pid) || (tentative && a.host != b.host)) continue;
      const Seen *first = ranks[i], *second = ranks[k];
      JobFault f;
      f.kind = "restarted";
      f.line = fmt::format(
          "rank {} was restarted by the launcher (pid {}{}, then pid {}): the measurement is void, a restarted "
          "rank's timings are not the job's (run it without restarts, e.g. torchrun --max-restarts 0)",
          *a.rank, a.pid, first->ended.empty() ? "" : " " + first->ended, b.pid);
      f.record = {{"kind", f.kind}, {"ranks", ranks_json({first, second})}};
      return f;
    }
  }
  return std::nullopt;
}

std::optional<JobFault> JobWatch::died(bool now) const {
  const auto t = std::chrono::steady_clock::now();
  const Seen* chosen = nullptr;
  for (const auto& [name, s] : seen_) {
    if (!s.a.rank || !s.gone) continue;
    if (s.a.stage == "reported" && s.a.completed.value_or(false)) continue;  // it ended as it should
    if (!now && std::chrono::duration<double>(t - s.gone_at).count() < death_grace_s_) continue;
    // The first seen gone; of those seen in one look, one that said why (it raised) before one
    // that did not (stopped by its launcher after the other's failure).
    if (!chosen || s.gone_at < chosen->gone_at ||
        (s.gone_at == chosen->gone_at && !s.a.reason.empty() && chosen->a.reason.empty())) {
      chosen = &s;
    }
  }
  if (!chosen) return std::nullopt;
  // The launcher knew which rank failed first (torch.multiprocessing.spawn's join): that one.
  std::string ended = chosen->ended;
  for (const auto& [n, l] : seen_) {
    if (l.a.failed_pid <= 0) continue;
    for (const auto& [m, r] : seen_) {
      if (r.a.rank && r.a.pid == l.a.failed_pid && r.a.host == l.a.host) {
        chosen = &r;
        ended = r.ended;
        if (ended.empty() && l.a.failed_exitcode) {
          const int c = *l.a.failed_exitcode;
          ended = c < 0 ? fmt::format("killed by signal {}", -c) : fmt::format("exited with status {}", c);
        }
      }
    }
  }
  const Announced& a = chosen->a;
  const std::string reason = a.reason.substr(0, a.reason.find('\n'));  // the line stays one line
  JobFault f;
  f.kind = "rank_died";
  const std::string stage = a.stage == "iterating" ? "while iterating" : "at its stage " + a.stage;
  if (!reason.empty()) {
    f.line =
        fmt::format("rank {} (pid {}) failed{}: {}", *a.rank, a.pid, ended.empty() ? "" : " (" + ended + ")", reason);
  } else {
    f.line = fmt::format("rank {} (pid {}) died {} without its report ({})", *a.rank, a.pid, stage,
                         ended.empty() ? "killed by a signal, or os._exit: it raised nothing" : ended);
  }
  f.record = {{"kind", f.kind}, {"ranks", ranks_json({chosen})}};
  return f;
}

std::optional<JobFault> JobWatch::never_iterated(double elapsed_s) const {
  if (elapsed_s < never_iterated_s_) return std::nullopt;
  std::vector<const Seen*> stuck;
  std::set<int> announced;
  int world = 0;
  for (const auto& [name, s] : seen_) {
    if (!s.a.rank) continue;
    announced.insert(*s.a.rank);
    world = std::max(world, s.a.world_size.value_or(0));
    if (!s.gone && (s.a.stage == "started" || s.a.stage == "init_process_group" || s.a.stage == "initialized")) {
      stuck.push_back(&s);
    }
  }
  if (stuck.empty()) return std::nullopt;
  std::sort(stuck.begin(), stuck.end(), [](const Seen* x, const Seen* y) { return *x->a.rank < *y->a.rank; });
  std::vector<int> ranks;
  for (const Seen* s : stuck) ranks.push_back(*s->a.rank);
  JobFault f;
  f.kind = "never_iterated";
  f.line = fmt::format("rank{} {} never iterated in {:g} s: ", ranks.size() > 1 ? "s" : "", join_ranks(ranks),
                       never_iterated_s_);
  if (stuck.size() == 1) {
    f.line += where(stuck.front()->a.stage);
  } else {
    for (std::size_t i = 0; i < stuck.size(); ++i) {
      f.line += fmt::format("{}rank {} {}", i ? ", " : "", *stuck[i]->a.rank, where(stuck[i]->a.stage));
    }
  }
  std::vector<int> missing;
  for (int r = 0; r < world; ++r) {
    if (!announced.count(r)) missing.push_back(r);
  }
  if (!missing.empty()) {
    f.line += fmt::format("; rank{} {} never started (world size {})", missing.size() > 1 ? "s" : "",
                          join_ranks(missing), world);
  }
  f.record = {
      {"kind", f.kind}, {"limit_s", never_iterated_s_}, {"ranks", ranks_json(stuck)}, {"never_started", missing}};
  return f;
}

std::optional<JobFault> JobWatch::poll(double elapsed_s) {
  if (std::chrono::duration<double>(std::chrono::steady_clock::now() - last_scan_).count() < 0.1) return std::nullopt;
  scan();
  if (several_ranks()) {
    if (auto f = restarted()) return f;
    if (auto f = died(false)) return f;
    if (auto f = never_iterated(elapsed_s)) return f;
  }
  if (!any_rank() && elapsed_s >= never_iterated_s_) {
    std::string launcher = launcher_of(command_);
    for (const auto& [name, s] : seen_) {
      if (!s.a.launcher.empty()) launcher = s.a.launcher;
    }
    if (!launcher.empty()) {
      JobFault f;
      f.kind = "launcher";
      f.line = fmt::format("the launcher {} started no rank in {:g} s (no rank's probe announced itself)", launcher,
                           never_iterated_s_);
      f.record = {{"kind", f.kind}, {"launcher", launcher}, {"ranks", nlohmann::json::array()}};
      return f;
    }
  }
  return std::nullopt;
}

std::optional<JobFault> JobWatch::after_exit(const core::ExitStatus& status, const fs::path& log) {
  scan();
  const std::string exit = status.exited ? fmt::format("exited with status {}", status.code)
                                         : fmt::format("died of signal {}", status.signal);
  if (!any_rank()) {
    std::string launcher = launcher_of(command_);
    for (const auto& [name, s] : seen_) {
      if (!s.a.launcher.empty())
        launcher = fmt::format("{} (in {})", s.a.launcher,
                               fs::path(command_.size() > 1 ? command_[1] : command_[0]).filename().string());
    }
    if (launcher.empty() || (status.exited && status.code == 0)) return std::nullopt;
    JobFault f;
    f.kind = "launcher";
    const std::string last = last_own_line(log);
    f.line = fmt::format(
        "the launcher {} failed before starting any rank ({}{}): no rank's probe ever announced "
        "itself",
        launcher, exit, last.empty() ? "" : ": " + last);
    // Debian 12's torch 1.13 on Python 3.11: torchrun's redirects parsing fails in to_map.
    if ((launcher.find("torchrun") != std::string::npos || launcher.find("torch.distributed") != std::string::npos) &&
        last.find("'NoneType' object has no attribute 'get'") != std::string::npos) {
      f.line +=
          "; this is Debian 12's torch 1.13 on Python 3.11, whose torchrun and torch.distributed.launch fail so: start "
          "the ranks with torch.multiprocessing.spawn, by hand (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set), or "
          "with srun";
    }
    f.record = {
        {"kind", f.kind},
        {"launcher", launcher},
        {"exit", status.exited ? nlohmann::json{{"status", status.code}} : nlohmann::json{{"signal", status.signal}}},
        {"ranks", nlohmann::json::array()}};
    return f;
  }
  // A job of one rank (srun -n 1, say) fails as a single process does.
  if (!several_ranks()) return std::nullopt;
  if (auto f = restarted()) return f;
  if (auto f = died(true)) {
    f->record["exit"] =
        status.exited ? nlohmann::json{{"status", status.code}} : nlohmann::json{{"signal", status.signal}};
    return f;
  }
  return std::nullopt;
}

std::vector<int> stop_job(pid_t root, const std::vector<int>& also) {
  std::set<int> all(also.begin(), also.end());
  if (root > 0) all.insert(root);
  // Stopped first (SIGSTOP: a stopped process forks no more), the tree read again until it holds
  // still, then killed: a parent killed first would hand its children to init, out of sight.
  for (int round = 0; round < 10; ++round) {
    std::map<int, std::vector<int>> children;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      const std::string n = e.path().filename().string();
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) continue;
      if (const auto st = proc_stat(std::stoi(n)); st && st->state != 'Z') children[st->ppid].push_back(std::stoi(n));
    }
    std::vector<int> todo(all.begin(), all.end());
    const std::size_t before = all.size();
    while (!todo.empty()) {
      const int p = todo.back();
      todo.pop_back();
      for (int c : children[p]) {
        if (all.insert(c).second) todo.push_back(c);
      }
    }
    for (int p : all) ::kill(p, SIGSTOP);
    if (all.size() == before && round > 0) break;
  }
  if (root > 0) core::signal_process_group(root, SIGKILL);
  for (int p : all) ::kill(p, SIGKILL);
  // Until each is gone (or a zombie its parent has yet to reap), for at most 5 s.
  for (int i = 0; i < 500; ++i) {
    const bool left = std::any_of(all.begin(), all.end(), [](int p) {
      const auto st = proc_stat(p);
      return st && st->state != 'Z';
    });
    if (!left) break;
    ::usleep(10000);
  }
  return {all.begin(), all.end()};
}

fs::path write_fail_record(const fs::path& report_dir, const std::string& line, nlohmann::json job_failure,
                           const std::vector<int>& stopped, std::chrono::system_clock::time_point started) {
  const auto now = std::chrono::system_clock::now();
  job_failure["stopped_pids"] = stopped;
  job_failure["text"] = line;
  const nlohmann::json r = {{"schema_version", 1},
                            {"name", "exec-job"},
                            {"suite", "mlbench"},
                            {"run_id", 0},
                            {"jr_id", 0},
                            {"hostname", core::hostname()},
                            {"completed", false},
                            {"reason", line},
                            {"job_failure", job_failure},
                            {"start_time", core::utc_iso8601(started)},
                            {"end_time", core::utc_iso8601(now)}};
  const fs::path file = report_dir / core::report_file_name("mlbench", "exec-job", 0, 0, true, now);
  core::write_json_atomic(file, r);
  return file;
}

}  // namespace mlbench::stall
