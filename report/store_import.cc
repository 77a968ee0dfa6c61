// mlbench-report --import: run folders into the results store (see store_import.h).
#include "report/store_import.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "core/cli.h"
#include "core/instance_report.h"
#include "core/report_name.h"
#include "core/stall_record.h"
#include "report/reports_tree.h"
#include "report/stall_results.h"
#include "report/store_rows.h"

namespace mlbench::report {
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json read_json(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return nullptr;
  return nlohmann::json::parse(read_text(file), nullptr, /*allow_exceptions=*/false);
}

// A file named as a report that cannot be read as one (truncated, empty, valid JSON that is
// no report object): a failed instance of the benchmark its name says, with the reason
// mlbench-report --reports gives it. nullopt for a file not named as a report.
std::optional<core::InstanceReport> unreadable_report(const fs::path& file, const nlohmann::json& j) {
  const auto named = parse_report_file_name(file.filename().string());
  if (!named || !named->run) return std::nullopt;
  core::InstanceReport r;
  r.name = named->name;
  r.suite = named->suite;
  r.run_id = *named->run;
  r.completed = false;
  r.reason = std::string("unreadable report (") + (j.is_discarded() ? "not valid JSON" : "not a report object") + ")";
  return r;
}

std::string string_at(const nlohmann::json& j, const std::string& key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// One run directory to import: its reports, its machine.json, its pass, its path in the run.
struct RunDir {
  fs::path dir;
  std::vector<fs::path> files;
  std::string prefix;  // the path of its files relative to the run's output folder ("R0/" or "")
  int pass = -1;       // from the directory name (R<k>, output<k>); -1: the reports' run_id
};

std::vector<fs::path> report_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && e.path().extension() == ".json" && name != "machine.json" && name != "stall.json") {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The run directories DIR names, and the folder that is the run's output folder.
std::vector<RunDir> run_dirs(const fs::path& dir, fs::path& output_folder) {
  std::vector<RunDir> out;
  std::error_code ec;
  switch (reports_input_kind(dir)) {
    case ReportsInput::ReportFile:
      output_folder = dir.parent_path();
      out.push_back({dir.parent_path(), {dir}, "", run_number(dir.parent_path().filename().string())});
      break;
    case ReportsInput::RunDirectory:
      output_folder = dir;
      out.push_back({dir, report_files(dir), "", run_number(dir.filename().string())});
      break;
    case ReportsInput::Tree:
      output_folder = dir;
      for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (e.is_directory(ec) && run_number(name) >= 0) {
          out.push_back({e.path(), report_files(e.path()), name + "/", run_number(name)});
        }
      }
      std::sort(out.begin(), out.end(), [](const RunDir& a, const RunDir& b) { return a.dir < b.dir; });
      break;
  }
  return out;
}

// The machine of a run directory: its machine.json, else the first report's machine block.
std::optional<store::MachineRecord> machine_of(const nlohmann::json& machine_json, const core::InstanceReport& r) {
  if (machine_json.is_object()) {
    try {
      return store::machine_record(core::parse_machine_info(machine_json), machine_json);
    } catch (const core::ReportFormatError&) {
      // a machine.json this reader cannot use (a hand-written one): the report's block below
    }
  }
  if (r.machine) return store::machine_record(*r.machine, r.raw.contains("machine") ? r.raw["machine"] : nullptr);
  if (!r.hostname.empty()) {
    core::MachineInfo m;
    m.hostname = r.hostname;
    if (r.gpu && !r.gpu->empty()) m.gpus = {*r.gpu};
    return store::machine_record(m, nullptr);
  }
  return std::nullopt;
}

// What the import learns of a run from its reports and machine.json, recorded once.
struct RunFacts {
  store::RunRecord run;
  bool known = false;  // already in the store (recorded by mlbench-run as it ran): left as it is
};

void widen_times(store::RunRecord& run, const core::InstanceReport& r) {
  if (!r.start_time.empty() && (run.started_at.empty() || r.start_time < run.started_at)) run.started_at = r.start_time;
  const std::string end = r.end_time.empty() ? r.start_time : r.end_time;
  if (!end.empty() && end > run.finished_at) run.finished_at = end;
}

void import_stall_analyses(store::ResultsStore& store, const fs::path& dir, const std::string& only_machine,
                           ImportCounts& counts) {
  for (const fs::path& file : find_stall_files({dir})) {
    const std::string text = read_text(file);
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    core::StallRecord record;
    try {
      if (j.is_discarded()) throw core::ReportFormatError("not valid JSON");
      record = core::parse_stall_record(j);
    } catch (const core::ReportFormatError& e) {
      counts.warnings.push_back(fmt::format("{}: {}, not imported", file.string(), e.what()));
      continue;
    }
    store::StallAnalysisRecord a = store::stall_analysis_record(record, text);
    // Its machine: that of the reports of its runs, else the one machine of the import.
    for (const auto& [label, run] : record.runs) {
      if (run.report.empty() || !a.machine.empty()) continue;
      const fs::path report =
          fs::path(run.report).is_absolute() ? fs::path(run.report) : file.parent_path() / run.report;
      try {
        const core::InstanceReport r = core::read_instance_report(report);
        if (const auto m = machine_of(nullptr, r)) {
          store.record_machine(*m);
          a.machine = m->fingerprint;
        }
        if (a.recorded_at.empty()) a.recorded_at = r.end_time.empty() ? r.start_time : r.end_time;
      } catch (const core::ReportFormatError&) {
        // the run's report is not beside it (copied without it): the machine below
      }
    }
    if (a.machine.empty()) a.machine = only_machine;
    if (a.recorded_at.empty()) {
      std::error_code ec;
      const auto mtime = fs::last_write_time(file, ec);
      if (!ec) {
        a.recorded_at = core::utc_iso8601(
            std::chrono::time_point_cast<std::chrono::system_clock::duration>(std::chrono::file_clock::to_sys(mtime)));
      }
    }
    const auto there = store.stall_analyses(a.bench);
    if (std::any_of(there.begin(), there.end(), [&](const auto& x) { return x.analysis_id == a.analysis_id; })) {
      ++counts.stalls_there;
      continue;
    }
    store.record_stall(a);
    ++counts.stalls_added;
  }
}

}  // namespace

std::string import_run_id(const fs::path& folder) {
  std::error_code ec;
  fs::path canonical = fs::canonical(folder, ec);
  if (ec) canonical = fs::absolute(folder).lexically_normal();
  return "import-" + core::sha256_hex(canonical.string()).substr(0, 16);
}

void import_into_store(store::ResultsStore& store, const fs::path& dir, ImportCounts& counts) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw InputError(fmt::format("--import {}: no such file or directory", dir.string()));
  fs::path output_folder;
  const std::vector<RunDir> dirs = run_dirs(dir, output_folder);
  const nlohmann::json tree_machine = read_json(output_folder / "machine.json");
  std::map<std::string, RunFacts> runs;
  std::set<std::string> machines;
  struct Pending {
    std::string run_id, file;
    std::int64_t pass = 0;
    core::InstanceReport report;
  };
  std::vector<Pending> pending;
  int reports = 0;
  const int stalls_before = counts.stalls_added + counts.stalls_there;
  for (const RunDir& rd : dirs) {
    const nlohmann::json machine_json = rd.dir == output_folder ? tree_machine : read_json(rd.dir / "machine.json");
    for (const fs::path& file : rd.files) {
      const nlohmann::json j = read_json(file);
      core::InstanceReport r;
      if (!core::report_identity(j)) {
        // Named as a report but unreadable: a failed instance, as --reports counts it. Another
        // file (a jobs file, a probe's output) is not a report: skipped, or named when unreadable.
        const auto unreadable = unreadable_report(file, j);
        if (!unreadable) {
          if (j.is_discarded())
            counts.warnings.push_back(fmt::format("{}: not valid JSON, not imported", file.string()));
          continue;
        }
        r = *unreadable;
        counts.warnings.push_back(fmt::format("{}: {}; imported as a failed instance", file.string(),
                                              j.is_discarded() ? "not valid JSON" : "not a report object"));
        ++counts.invalid;
      } else {
        try {
          r = core::parse_instance_report(j);
        } catch (const core::ReportFormatError& e) {
          // Kept as written, a failed instance with the reader's reason (the reports tree's rule).
          counts.warnings.push_back(fmt::format("{}: {}; imported as a failed instance", file.string(), e.what()));
          ++counts.invalid;
          const auto identity = core::report_identity(j);
          r = core::InstanceReport{};
          r.raw = j;
          r.name = identity->name;
          r.suite = identity->suite;
          r.reason = e.what();
        }
      }
      ++reports;
      std::string run_id = r.runner && r.runner->run_id ? *r.runner->run_id : "";
      if (run_id.empty()) run_id = string_at(machine_json, "run_id");
      if (run_id.empty()) run_id = string_at(tree_machine, "run_id");
      if (run_id.empty()) run_id = import_run_id(output_folder);
      RunFacts& facts = runs[run_id];
      if (facts.run.run_id.empty()) {
        facts.run.run_id = run_id;
        facts.known = store.run(run_id).has_value();
        facts.run.status = "imported";
        facts.run.suite = r.suite;
        facts.run.outdir = fs::absolute(output_folder).lexically_normal().string();
        const nlohmann::json run_block =
            machine_json.is_object() && machine_json.contains("run") ? machine_json["run"] : nlohmann::json();
        facts.run.jobs_file = string_at(run_block, "jobs_file");
        facts.run.started_at = string_at(run_block, "started");
        if (r.version) {
          facts.run.mlbench_version = r.version->mlbench;
          facts.run.mlbench_commit = r.version->git;
        }
        if (const auto m = machine_of(machine_json, r)) {
          if (!machines.count(m->fingerprint)) store.record_machine(*m);
          machines.insert(m->fingerprint);
          facts.run.machine = m->fingerprint;
        }
      }
      widen_times(facts.run, r);
      counts.runs.insert(run_id);
      const std::string rel = rd.prefix + file.filename().string();
      pending.push_back({run_id, rel, rd.pass >= 0 ? rd.pass : r.run_id, std::move(r)});
    }
  }
  // The runs first (with the times of all their reports), then their instances.
  for (const auto& [id, facts] : runs) {
    if (!facts.known) store.record_run(facts.run);
  }
  for (const Pending& p : pending) {
    if (store.has_instance(p.run_id, p.file)) {
      ++counts.instances_there;
      continue;
    }
    store.record_instance(instance_record(p.report, p.file, p.run_id, p.pass));
    ++counts.instances_added;
  }
  import_stall_analyses(store, dir, machines.size() == 1 ? *machines.begin() : "", counts);
  if (reports == 0 && counts.stalls_added + counts.stalls_there == stalls_before) {
    throw InputError(fmt::format(
        "--import {}: not a run folder (no instance reports in it or in R<k>/ or output<k>/ run directories, and no "
        "stall.json under it)",
        dir.string()));
  }
}

std::string import_summary(const ImportCounts& c) {
  return fmt::format("imported {} instance report{} of {} run{}, {} already there, {} stall analys{}{}",
                     c.instances_added, c.instances_added == 1 ? "" : "s", c.runs.size(), c.runs.size() == 1 ? "" : "s",
                     c.instances_there, c.stalls_added, c.stalls_added == 1 ? "is" : "es",
                     c.stalls_there ? fmt::format(" ({} already there)", c.stalls_there) : "");
}

}  // namespace mlbench::report
