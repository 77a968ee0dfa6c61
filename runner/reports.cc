// Instance report finishing and lookup (see reports.h).
#include "reports.h"

#include <fstream>

#include "core/credentials.h"
#include "core/report.h"

namespace mlbench::runner {

namespace fs = std::filesystem;

std::set<fs::path> list_reports(const fs::path& dir, const std::string& prefix) {
  std::set<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0 &&
        n.find(".tmp") == std::string::npos) {
      out.insert(e.path());
    }
  }
  return out;
}

std::optional<nlohmann::json> read_report(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.is_object()) return j;
  } catch (const nlohmann::json::exception&) {
  }
  return std::nullopt;
}

std::optional<core::InstanceReport> read_instance_report(const fs::path& file) {
  const auto j = read_report(file);
  if (!j) return std::nullopt;
  try {
    return core::parse_instance_report(*j);
  } catch (const core::ReportFormatError& e) {
    core::InstanceReport bad;
    bad.completed = false;
    bad.reason = e.what();
    return bad;
  }
}

namespace {
bool is_fail_name(const fs::path& p) {
  return p.filename().string().find(".FAIL.") != std::string::npos;
}

// Whether the runner finished this report (its runner block): a benchmark's own report
// is only half a record, e.g. one an orphan left after its runner was SIGKILLed.
bool runner_completed(const core::InstanceReport& r) {
  return r.runner.has_value();
}
}  // namespace

bool same_point(const core::InstanceReport& r, const Instance& inst) {
  if (r.runner && r.runner->point) return *r.runner->point == inst.point;
  return inst.points == 1;
}

std::optional<fs::path> completed_report(const fs::path& dir, const Instance& inst) {
  for (const auto& p : list_reports(dir, inst.report_prefix)) {
    if (is_fail_name(p)) continue;
    const auto r = read_instance_report(p);
    if (r && r->completed && runner_completed(*r) && same_point(*r, inst)) return p;
  }
  return std::nullopt;
}

int supersede_failures(const fs::path& dir, const Instance& inst) {
  int moved = 0;
  for (const auto& p : list_reports(dir, inst.report_prefix)) {
    const auto r = read_instance_report(p);
    const bool failed = is_fail_name(p) || !r || !r->completed || !runner_completed(*r);
    if (!failed || (r && !same_point(*r, inst))) continue;
    fs::create_directories(dir / "superseded");
    std::error_code ec;
    fs::rename(p, dir / "superseded" / p.filename(), ec);
    if (!ec) ++moved;
  }
  return moved;
}

FinalReport finalize_report(const fs::path& dir, const Instance& inst, const std::optional<fs::path>& written,
                            const Outcome& outcome, const RunnerBlocks& blocks, core::InstanceReport base) {
  std::optional<nlohmann::json> report;
  if (written) report = read_report(*written);
  const auto now = std::chrono::system_clock::now();
  core::InstanceReport r = std::move(base);
  if (report) {
    try {
      r = core::parse_instance_report(*report);
    } catch (const core::ReportFormatError&) {
      r.raw = *report;  // kept as written under the runner's own fields; the outcome says why it failed
    }
  }
  r.isolation = blocks.isolation;
  r.runner = blocks.runner;
  if (blocks.resources) r.resources = blocks.resources;
  if (blocks.interference) r.interference = blocks.interference;
  r.completed = outcome.passed;
  if (outcome.passed) {
    r.reason.clear();
  } else {
    if (!r.reason.empty() && r.reason != outcome.reason) r.benchmark_reason = r.reason;
    r.reason = outcome.reason;
    if (r.end_time.empty()) r.end_time = core::utc_iso8601(now);
  }
  fs::path target;
  if (report && (outcome.passed == !is_fail_name(*written))) {
    target = *written;  // already named right: rewrite in place
  } else {
    target =
        dir / core::report_file_name(r.suite, inst.name, static_cast<int>(r.run_id), inst.slot, !outcome.passed, now);
  }
  // A password in the benchmark's own fields (its args, a data URL) is never written.
  nlohmann::json written_json = core::to_json(r);
  core::mask_credentials(written_json);
  core::write_json_atomic(target, written_json);
  // The instance's own file is replaced by the runner's: one report per instance.
  if (written && *written != target) {
    std::error_code ec;
    fs::remove(*written, ec);
  }
  return {target, std::move(r)};
}

}  // namespace mlbench::runner
