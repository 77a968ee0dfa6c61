#include "runner/store_recorder.h"

#include <chrono>
#include <fstream>

#include <fmt/format.h>

#include "core/report_name.h"
#include "report/store_rows.h"
#include "runner/reports.h"

namespace mlbench::runner {

namespace fs = std::filesystem;

StoreRecorder::StoreRecorder(const std::string& spec, const store::RunRecord& run, const fs::path& outdir,
                             std::ostream& err)
    : spec_(spec), run_(run), outdir_(outdir), err_(err) {
  if (spec_.empty()) return;
  try {
    store_ = store::ResultsStore::open(spec_);
    const store::MachineRecord machine = store::this_machine();
    store_->record_machine(machine);
    run_.machine = machine.fingerprint;
    store_->record_run(run_);
  } catch (const std::exception& e) {
    store_.reset();
    fail(e.what());
  }
}

void StoreRecorder::fail(const std::string& what) {
  // The first failure says what it means; the rest only what failed.
  if (failures_++ == 0) {
    err_ << "mlbench-run: error: results store " << what
         << " (the run goes on; its reports stay in files: mlbench-report --store " << store::redact_url(spec_)
         << " --import " << outdir_.string() << " loads them later)" << std::endl;
  } else if (failures_ <= 3) {
    err_ << "mlbench-run: error: results store " << what << std::endl;
  }
}

void StoreRecorder::record(const FinalReport& final, int pass) {
  if (!store_) return;
  try {
    const std::string relative = final.file.lexically_relative(outdir_).generic_string();
    store_->record_instance(
        report::instance_record(final.report, relative.empty() ? final.file.string() : relative, run_.run_id, pass));
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

void StoreRecorder::finish(const std::string& status) {
  if (!store_) return;
  try {
    run_.status = status;
    run_.finished_at = core::utc_iso8601(std::chrono::system_clock::now());
    store_->record_run(run_);
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

std::string resumed_run_id(const fs::path& outdir) {
  for (const fs::path& dir : {outdir, outdir / "R0"}) {
    std::ifstream in(dir / "machine.json");
    if (!in) continue;
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_object() && j.contains("run_id") && j["run_id"].is_string()) return j["run_id"].get<std::string>();
  }
  return "";
}

}  // namespace mlbench::runner
