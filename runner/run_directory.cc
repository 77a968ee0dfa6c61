// Writing the run directory (see run_directory.h).
#include "run_directory.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "core/credentials.h"
#include "core/instance_report.h"
#include "core/report.h"
#include "core/sysinfo.h"
#include "reports.h"

namespace mlbench::runner {

namespace fs = std::filesystem;

namespace {

nlohmann::json or_null(const std::optional<std::uint64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

nlohmann::json slots_json(const std::vector<Slot>& slots) {
  nlohmann::json sl = nlohmann::json::array();
  for (const auto& s : slots) {
    sl.push_back(
        {{"index", s.index}, {"cpus", core::format_cpu_list(s.cpus)}, {"memory_bytes", or_null(s.memory_bytes)}});
  }
  return sl;
}

core::RunnerInfo runner_block(const Instance& inst, const std::optional<Ending>& ending) {
  const bool exited = ending && ending->launched() && ending->exited;
  const bool signalled = ending && ending->launched() && !ending->exited && ending->signal != 0;
  core::RunnerInfo r;
  r.job = inst.name;
  r.point = inst.point;
  r.sweep = inst.label;
  r.slot = inst.slot;
  r.cpus = core::format_cpu_list(inst.cpus);
  if (inst.memory_bytes) r.memory_limit_bytes = static_cast<std::int64_t>(*inst.memory_bytes);
  r.command = shell_line(inst);
  r.log = inst.log_name;
  r.wall_seconds = ending && ending->launched() ? ending->wall_seconds : 0.0;
  if (exited) r.exit_code = ending->exit_code;
  if (signalled) r.signal = ending->signal;
  // Under Slurm: the job step's state (only there, so local reports are unchanged).
  if (ending && !ending->state.empty()) r.slurm_state = ending->state;
  return r;
}

// The fields of a report the runner writes itself (the instance left none).
core::InstanceReport base_report(const Instance& inst, const PlanSettings& settings,
                                 const std::optional<Ending>& ending) {
  const bool ran = ending && ending->launched();
  const auto now = std::chrono::system_clock::now();
  core::InstanceReport base;
  base.raw = {{"resources", nullptr}, {"vcd", ""}};
  base.schema_version = core::kInstanceReportSchema;
  base.name = inst.name;
  base.suite = settings.suite;
  base.run_id = settings.run_id;
  base.jr_id = inst.slot;
  base.vcd = inst.env.count("CUDA_VISIBLE_DEVICES") ? inst.env.at("CUDA_VISIBLE_DEVICES") : "";
  base.seed = inst.seed;
  base.hostname = core::hostname();
  base.start_time = core::utc_iso8601(ran ? ending->started : now);
  if (ran) base.end_time = core::utc_iso8601(ending->ended);
  return base;
}

}  // namespace

void write_machine_json(const fs::path& dir, const RunFacts& run, const PlanSettings& settings, int pass) {
  fs::create_directories(dir);
  nlohmann::json machine = core::machine_description();
  machine["isolation"] = run.isolation;
  machine["cgroup_parent"] = run.cgroup_parent ? nlohmann::json(*run.cgroup_parent) : nlohmann::json();
  machine["gpus_detected"] = run.gpus;
  machine["memory_total_bytes"] = run.memory_total_bytes;
  if (!run.run_key.empty()) machine["run_id"] = run.run_key;
  machine["slots"] = slots_json(run.slots);
  machine["run"] = {{"jobs_file", fs::absolute(run.jobs_file).string()},
                    {"suite", settings.suite},
                    {"run_id", settings.run_id},
                    {"uid", run.uid},
                    {"pass", pass},
                    {"data_directory", run.data_directory},
                    {"started", core::utc_iso8601(std::chrono::system_clock::now())}};
  core::mask_credentials(machine);  // a password in a path or URL is never written
  core::write_json_atomic(dir / "machine.json", machine);
}

void write_summary(const fs::path& dir, const std::vector<std::string>& lines, double total_seconds, bool final) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  if (final) text += total_line(total_seconds) + "\n";
  core::write_file_atomic(dir / "summary.txt", core::mask_credentials(text));
}

std::optional<fs::path> new_report(const fs::path& dir, const Instance& inst, const std::set<fs::path>& before) {
  std::optional<fs::path> written;
  for (const auto& r : list_reports(dir, inst.report_prefix)) {
    if (!before.count(r)) written = r;  // the newest name sorts last
  }
  return written;
}

FinalReport write_instance_report(const fs::path& dir, const Instance& inst, const PlanSettings& settings,
                                  const std::string& isolation, const std::optional<Ending>& ending,
                                  const std::optional<fs::path>& written, const Outcome& outcome) {
  RunnerBlocks blocks;
  blocks.isolation = isolation;
  blocks.runner = runner_block(inst, ending);
  if (ending && ending->launched()) {
    blocks.resources = ending->resources;
    blocks.interference = ending->interference;
  }
  if (!settings.run_key.empty()) blocks.runner.run_id = settings.run_key;
  return finalize_report(dir, inst, written, outcome, blocks, base_report(inst, settings, ending));
}

}  // namespace mlbench::runner
