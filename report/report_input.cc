// What --reports names, read into a Report with its notes (see report_input.h).
#include "report/report_input.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/instance_report.h"
#include "core/sysinfo.h"
#include "report/blas_notes.h"
#include "report/report_builder.h"
#include "report/report_statistics.h"
#include "report/reports_tree.h"
#include "report/stall_results.h"
#include "report/targets.h"

namespace mlbench::report {
namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

bool is_report_candidate(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && p.extension() == ".json" && p.filename() != "machine.json";
}

// The run directories (or the single file) that --reports names, with their run names.
std::vector<std::pair<std::string, fs::path>> run_dirs_of(const fs::path& reports) {
  std::vector<std::pair<std::string, fs::path>> out;
  std::error_code ec;
  switch (reports_input_kind(reports)) {
    case ReportsInput::ReportFile:
      out.emplace_back(reports.filename().string(), reports);
      break;
    case ReportsInput::RunDirectory:
      out.emplace_back(reports.filename().string(), reports);
      break;
    case ReportsInput::Tree:
      for (const fs::directory_entry& e : fs::directory_iterator(reports, ec)) {
        if (e.is_directory(ec) && run_number(e.path().filename().string()) >= 0) {
          out.emplace_back(e.path().filename().string(), e.path());
        }
      }
      std::sort(out.begin(), out.end());
      break;
  }
  return out;
}

std::vector<fs::path> report_files(const fs::path& run) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_regular_file(run, ec)) return {run};
  for (const fs::directory_entry& e : fs::directory_iterator(run, ec)) {
    if (is_report_candidate(e.path())) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::vector<std::string> suites_in(const fs::path& reports) {
  std::set<std::string> suites;
  for (const auto& [run, dir] : run_dirs_of(reports)) {
    for (const fs::path& f : report_files(dir)) {
      if (const auto id = core::report_identity(read_json(f))) suites.insert(id->suite);
    }
  }
  return {suites.begin(), suites.end()};
}

std::string repeated_passes_note(int runs) {
  if (runs >= kDefaultMinRuns) return "";
  return fmt::format(
      "{} run{}: sd and sd% need at least 2 runs, and the Mila rules compare on {} or more "
      "(mlbench-run --repeat-suite {}); the Deviation and Performance lines are not a valid comparison yet",
      runs, runs == 1 ? "" : "s", kDefaultMinRuns, kDefaultMinRuns);
}

std::string machines_note(const std::vector<std::pair<std::string, std::string>>& run_machines) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // machine -> runs, first seen first
  for (const auto& [run, machine] : run_machines) {
    const std::string m = machine.empty() ? "unknown machine" : machine;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == m; });
    if (it == groups.end()) {
      groups.push_back({m, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(run);
  }
  if (groups.size() < 2) return "";
  std::string text;
  for (const auto& [machine, runs] : groups) {
    std::string list;
    for (const std::string& r : runs) list += (list.empty() ? "" : " ") + r;
    text += fmt::format("{}{}: {}", text.empty() ? "" : "; ", machine, list);
  }
  return fmt::format("runs from {} machines grouped together ({}): their spread includes the machines' difference",
                     groups.size(), text);
}

std::string run_machine(const fs::path& run) {
  std::error_code ec;
  const fs::path dir = fs::is_regular_file(run, ec) ? run.parent_path() : run;
  try {
    const core::MachineInfo m = core::parse_machine_info(read_json(dir / "machine.json"));
    if (!m.hostname.empty()) {
      const std::string model = m.gpus.empty() ? m.cpu_model : m.gpus.front();
      return m.hostname + (model.empty() ? "" : " (" + model + ")");
    }
  } catch (const core::ReportFormatError&) {
    // no machine.json, or one this reader cannot use: the reports name their host
  }
  for (const fs::path& f : report_files(run)) {
    core::InstanceReport r;
    try {
      r = core::read_instance_report(f);
    } catch (const core::ReportFormatError&) {
      continue;  // the tree's reader lists it as a failure
    }
    if (r.hostname.empty()) continue;
    const std::string gpu = r.gpu.value_or("");
    return r.hostname + (gpu.empty() ? "" : " (" + gpu + ")");
  }
  return "";
}

std::optional<core::MachineInfo> reports_machine(const fs::path& reports) {
  const auto runs = run_dirs_of(reports);
  for (const auto& [name, run] : runs) {
    std::error_code ec;
    const fs::path dir = fs::is_regular_file(run, ec) ? run.parent_path() : run;
    for (const fs::path& file : {dir / "machine.json", reports / "machine.json"}) {
      try {
        const nlohmann::json j = read_json(file);
        if (j.is_object()) return core::parse_machine_info(j);
      } catch (const core::ReportFormatError&) {
        // a machine.json this reader cannot use: the reports name their machine
      }
    }
    for (const fs::path& f : report_files(run)) {
      try {
        const core::InstanceReport r = core::read_instance_report(f);
        if (r.machine) return r.machine;
      } catch (const core::ReportFormatError&) {
        continue;
      }
    }
  }
  return std::nullopt;
}

std::optional<Targets> targets_for_machine(const core::MachineInfo& machine, const std::vector<fs::path>& dirs,
                                           std::string* why_none) {
  const std::string available = available_targets(dirs);
  if (machine.gpus.empty()) {
    // Every CPU targets file of the folder in use (the first with targets): the one made on this CPU, if any.
    for (const fs::path& f : targets_files(dirs)) {
      try {
        const Targets t = load_targets_file(f);
        if (is_cpu_targets(t) && !cpu_targets_mismatch(t, machine.cpu_model, machine.logical_cores, available)) {
          return t;
        }
      } catch (const InputError&) {
        // not a targets file this reader can use: not this kind
      }
    }
    if (why_none) {
      *why_none = fmt::format("no target for this CPU ({} x{}); targets exist for: {}",
                              machine.cpu_model.empty() ? "unknown model" : machine.cpu_model, machine.logical_cores,
                              available.empty() ? "none" : available);
    }
    return std::nullopt;
  }
  std::vector<std::string> kinds{machine.gpus.front()};
  std::istringstream words(machine.gpus.front());
  for (std::string w; words >> w;) {
    if (lower(w) != "nvidia" && lower(w) != "geforce") kinds.push_back(w);
  }
  for (const std::string& kind : kinds) {
    try {
      return load_targets_file(find_targets_file(kind, dirs));
    } catch (const InputError&) {
      // not this kind; try the next word
    }
  }
  if (why_none) {
    *why_none = fmt::format("no target for this GPU ({}); targets exist for: {}", machine.gpus.front(),
                            available.empty() ? "none" : available);
  }
  return std::nullopt;
}

std::optional<Targets> targets_for_machine(const std::vector<std::string>& gpu_names, const std::vector<fs::path>& dirs,
                                           std::string* why_none) {
  core::MachineInfo m;
  m.gpus = gpu_names;
  m.cpu_model = core::cpu_model();
  m.logical_cores = core::logical_cores();
  return targets_for_machine(m, dirs, why_none);
}

Report load_report(const ReportRequest& q, ReportsTree* tree_out) {
  const ReportsInput kind = reports_input_kind(q.reports);
  const bool single = kind != ReportsInput::Tree;
  const ReportsTree tree = load_reports_tree(q.reports, q.suite, q.min_runs);
  // CPU targets compare only with runs on the CPU they were made on.
  Targets targets = q.targets;
  std::string targets_note;
  if (is_cpu_targets(targets) && !targets.source.empty()) {
    const auto machine = reports_machine(q.reports);
    if (targets.cpu_model.empty()) {
      targets_note = fmt::format(
          "{} names no CPU (made before targets named their cpu_model and logical_cores): its machine kind is "
          "unknown, so the vs-target column may compare with another CPU",
          targets.source);
    } else if (machine && machine->gpus.empty()) {
      if (auto line = cpu_targets_mismatch(
              targets, machine->cpu_model, machine->logical_cores,
              fmt::format("{} ({})", targets_kind(targets).substr(5), fs::path(targets.source).filename().string()))) {
        targets_note = std::move(*line);
        targets = Targets{};
      }
    }
  }
  std::vector<fs::path> roots{kind == ReportsInput::ReportFile ? q.reports.parent_path() : q.reports};
  for (const fs::path& d : q.stall_dirs) {
    if (!fs::exists(d)) throw InputError(fmt::format("--stall {}: no such file or directory", d.string()));
    roots.push_back(d);
  }
  std::vector<std::string> stall_warnings;
  // A single report file has no stall folders of its own to search.
  const auto analyses = kind == ReportsInput::ReportFile && q.stall_dirs.empty()
                            ? std::map<std::string, StallAnalysis>{}
                            : find_stall_analyses(roots, stall_warnings);
  // Fewer runs than asked for show what they can, with the note below.
  const int runs = static_cast<int>(tree.runs.size());
  Report report =
      build_report(q.suite, q.reports.string(), tree, targets, analyses, single ? 1 : std::min(q.min_runs, runs));
  if (!targets_note.empty()) report.info.push_back(targets_note);
  for (std::string& w : stall_warnings) report.notes.warnings.push_back(std::move(w));
  for (std::string& w : blas_warnings(tree)) report.notes.warnings.push_back(std::move(w));
  if (const std::string note = repeated_passes_note(runs); !note.empty()) {
    report.info.push_back(note);
  }
  std::vector<std::pair<std::string, std::string>> machines;
  for (const auto& [run, dir] : run_dirs_of(q.reports)) {
    if (std::find(tree.runs.begin(), tree.runs.end(), run) != tree.runs.end() || single) {
      machines.emplace_back(run, run_machine(dir));
    }
  }
  if (const std::string note = machines_note(machines); !note.empty()) report.info.push_back(note);
  if (tree_out) *tree_out = tree;
  return report;
}

}  // namespace mlbench::report
