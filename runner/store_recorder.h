// mlbench-run's side of the results store (docs/report.md, "The results store"): the
// run is recorded once its first run directory's own files are safe (machine.json), each
// instance when its final report lands, and the run's end. The JSON files stay the source
// of truth: a store that cannot be opened or written is one line naming it and the cause,
// the run goes on, and its exit is non-zero (mlbench-report --import loads the files later).
// A SQLite store on the run folder's own file system gives way to the run's files: below
// kStoreReserveBytes free there, it is not opened or written any more (one line saying so).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "runner/reports.h"
#include "store/results_store.h"

namespace mlbench::runner {

// Free space a SQLite store leaves to the run's reports, logs and summaries when it shares
// their file system (its -wal and -shm files alone take ~100 KB).
inline constexpr std::uint64_t kStoreReserveBytes = 1ull << 20;

// Why a SQLite store `spec` must give way to the run's files in `outdir`: "not used: only
// 96 KiB free on DIR, kept for the run's reports"; nullopt when it need not (a PostgreSQL
// store, another file system, room enough).
std::optional<std::string> store_gives_way(const std::string& spec, const std::filesystem::path& outdir);

class StoreRecorder {
 public:
  // `spec`: a file or postgresql:// URL; "" records nothing. `outdir`: the run's output
  // folder (report paths are recorded relative to it). Errors go to `err`. Opens nothing.
  StoreRecorder(const std::string& spec, const store::RunRecord& run, const std::filesystem::path& outdir,
                std::ostream& err);

  bool enabled() const { return !spec_.empty(); }
  // Opens the store and records the machine and the run: once the run folder's own files
  // (the first machine.json) are written. Again: nothing.
  void open();
  // Records a final report the runner wrote, of pass `pass`.
  void record(const FinalReport& report, int pass);
  // The run's end: "finished", "interrupted" or "failed".
  void finish(const std::string& status);
  // Whether any open or write failed (the exit code says so).
  bool failed() const { return failures_ > 0; }

 private:
  void fail(const std::string& what);
  // Whether the store may still grow; gives it up (one line) when it must give way.
  bool room_left();

  std::string spec_;
  store::RunRecord run_;
  std::filesystem::path outdir_;
  std::ostream& err_;
  std::unique_ptr<store::ResultsStore> store_;
  bool opened_ = false;  // open() was called (whether or not it succeeded)
  int failures_ = 0;
};

// The run id a --resume continues: machine.json's "run_id" in `outdir` or `outdir`/R0;
// "" when there is none (a run directory from before the store).
std::string resumed_run_id(const std::filesystem::path& outdir);

}  // namespace mlbench::runner
