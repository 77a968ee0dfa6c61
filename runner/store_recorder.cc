#include "runner/store_recorder.h"

#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include <fmt/format.h>

#include "core/credentials.h"
#include "core/report_name.h"
#include "report/store_rows.h"
#include "runner/reports.h"

namespace mlbench::runner {

namespace fs = std::filesystem;

namespace {

// The nearest folder of `path` that exists (the store's file may not yet).
fs::path existing_folder(fs::path path) {
  std::error_code ec;
  while (!fs::is_directory(path, ec) && path.has_parent_path() && path != path.parent_path()) {
    path = path.parent_path();
  }
  return path;
}

std::string kib_or_mib(std::uint64_t bytes) {
  return bytes >= (1u << 20) ? fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20))
                             : fmt::format("{} KiB", bytes / 1024);
}

}  // namespace

std::optional<std::string> store_gives_way(const std::string& spec, const fs::path& outdir) {
  if (spec.empty() || store::is_postgresql_url(spec)) return std::nullopt;
  const fs::path store_dir = existing_folder(fs::absolute(spec).parent_path());
  const fs::path run_dir = existing_folder(fs::absolute(outdir));
  struct stat a {
  }, b{};
  if (::stat(store_dir.c_str(), &a) != 0 || ::stat(run_dir.c_str(), &b) != 0 || a.st_dev != b.st_dev) {
    return std::nullopt;  // on another file system it cannot take the reports' room
  }
  std::error_code ec;
  const fs::space_info space = fs::space(store_dir, ec);
  if (ec || space.available >= kStoreReserveBytes) return std::nullopt;
  return fmt::format("not used: only {} free on {}, kept for the run's reports", kib_or_mib(space.available),
                     store_dir.string());
}

StoreRecorder::StoreRecorder(const std::string& spec, const store::RunRecord& run, const fs::path& outdir,
                             std::ostream& err)
    : spec_(spec), run_(run), outdir_(outdir), err_(err) {}

bool StoreRecorder::room_left() {
  if (const auto why = store_gives_way(spec_, outdir_)) {
    store_.reset();
    fail(core::mask_credentials(spec_) + ": " + *why);
    return false;
  }
  return true;
}

void StoreRecorder::open() {
  if (spec_.empty() || opened_) return;
  opened_ = true;
  if (!room_left()) return;
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
         << " (the run goes on; its reports stay in files: mlbench-report --store " << core::mask_credentials(spec_)
         << " --import " << outdir_.string() << " loads them later)" << std::endl;
  } else if (failures_ <= 3) {
    err_ << "mlbench-run: error: results store " << what << std::endl;
  }
}

void StoreRecorder::record(const FinalReport& final, int pass) {
  if (!store_ || !room_left()) return;
  try {
    const std::string relative = final.file.lexically_relative(outdir_).generic_string();
    store_->record_instance(
        report::instance_record(final.report, relative.empty() ? final.file.string() : relative, run_.run_id, pass));
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

void StoreRecorder::finish(const std::string& status) {
  if (!store_ || !room_left()) return;
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
