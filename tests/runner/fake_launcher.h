// Test support: a Launcher that runs nothing. Each request gets a scripted
// behaviour (how long it "runs" in virtual seconds, how it ends, whether it
// writes a report into its OUTPUT_DIRECTORY); time advances only through wait(),
// straight to the next event, so scheduler tests neither sleep nor depend on
// machine speed.
#pragma once

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/launcher.h"

namespace mlbench::runner::testing {

struct FakeBehaviour {
  static constexpr double kForever = std::numeric_limits<double>::infinity();
  double runs_for = 1;  // virtual seconds; kForever: until signalled
  int exit_code = 0;
  int signal = 0;             // > 0: dies of this signal at its end instead of exiting
  bool writes_report = true;  // at a normal end
  bool report_completed = true;
  bool ignores_term = false;  // SIGTERM and SIGINT do nothing (SIGKILL always works)
  std::uint64_t oom_kills = 0;
  std::string launch_error;  // non-empty: the start fails
};

class FakeLauncher : public Launcher {
 public:
  // The behaviour of each request (default: runs 1 s, exits 0, writes a completed report).
  std::function<FakeBehaviour(const LaunchRequest&)> script = [](const LaunchRequest&) { return FakeBehaviour{}; };
  std::optional<double> interrupt_at;       // virtual time of a Ctrl-C
  std::vector<LaunchRequest> started;       // every request, in order
  std::vector<std::pair<Id, int>> signals;  // every signal sent, in order

  Id start(const LaunchRequest& request) override {
    started.push_back(request);
    Proc p{request, script(request), clock_, clock_, std::nullopt};
    p.end_at = clock_ + p.behaviour.runs_for;
    if (!p.behaviour.launch_error.empty()) {
      Ending e;
      e.launch_error = p.behaviour.launch_error;
      p.ending = e;
    }
    procs_.push_back(std::move(p));
    return static_cast<Id>(procs_.size() - 1);
  }

  std::optional<Ending> poll(Id id) override {
    Proc& p = procs_.at(static_cast<std::size_t>(id));
    if (!p.ending && clock_ >= p.end_at) end(p, p.behaviour.signal);
    p.seen = p.ending.has_value();
    return p.ending;
  }

  void signal(Id id, int sig) override {
    signals.emplace_back(id, sig);
    Proc& p = procs_.at(static_cast<std::size_t>(id));
    if (p.ending || (sig != SIGKILL && p.behaviour.ignores_term)) return;
    p.end_at = clock_;
    p.behaviour.writes_report = false;
    end(p, sig);
  }

  int wait(double seconds) override {
    // An end not yet polled wakes the caller at once, as SIGCHLD does.
    for (const auto& p : procs_) {
      if (p.ending && !p.seen) return 0;
    }
    const double target = clock_ + std::max(0.0, seconds);
    double next = target;
    for (const auto& p : procs_) {
      if (!p.ending) next = std::min(next, std::max(clock_, p.end_at));
    }
    if (interrupt_at && *interrupt_at <= next) {
      clock_ = std::max(clock_, *interrupt_at);
      interrupt_at.reset();
      return SIGINT;
    }
    clock_ = next;
    return 0;
  }

  double now() const override { return clock_; }
  std::string isolation() const override { return "fake"; }

 private:
  struct Proc {
    LaunchRequest request;
    FakeBehaviour behaviour;
    double started = 0;
    double end_at = 0;
    std::optional<Ending> ending;
    bool seen = false;  // its ending was returned by poll()
  };

  void end(Proc& p, int sig) {
    Ending e;
    e.exited = sig == 0;
    e.exit_code = sig == 0 ? p.behaviour.exit_code : 0;
    e.signal = sig;
    e.oom_kills = p.behaviour.oom_kills;
    e.wall_seconds = clock_ - p.started;
    e.resources = core::ResourcesInfo{};
    e.resources->source = "fake";
    e.resources->cpu_seconds = e.wall_seconds;
    if (p.behaviour.writes_report) write_report(p);
    p.ending = e;
  }

  // <suite>.<name>.R<run>.D<slot>[.FAIL].<n>.json in OUTPUT_DIRECTORY, as a benchmark names it.
  void write_report(const Proc& p) {
    const auto& env = p.request.env;
    const bool ok = p.behaviour.report_completed;
    const std::string name = env.at("SUITE_NAME") + "." + env.at("BENCH_NAME") + ".R" + env.at("RUN_ID") + ".D" +
                             env.at("JOB_ID") + (ok ? "" : ".FAIL") + "." + std::to_string(++reports_) + ".json";
    nlohmann::json r = {{"name", env.at("BENCH_NAME")},
                        {"suite", env.at("SUITE_NAME")},
                        {"run_id", std::stoi(env.at("RUN_ID"))},
                        {"jr_id", p.request.slot},
                        {"completed", ok}};
    if (!ok) r["reason"] = "loss is NaN";
    std::ofstream(env.at("OUTPUT_DIRECTORY") + "/" + name) << r.dump();
  }

  std::vector<Proc> procs_;
  double clock_ = 1000;  // not 0: durations must come from differences
  int reports_ = 0;
};

}  // namespace mlbench::runner::testing
