// mlbench-run's side of the results store (docs/report.md, "The results store"): the
// run is recorded when it starts, each instance when its final report lands, and the
// run's end. The JSON files stay the source of truth: a store that cannot be opened or
// written is one line naming it and the cause, the run goes on, and its exit is non-zero
// (mlbench-report --import loads the files later).
#pragma once

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>

#include "runner/reports.h"
#include "store/results_store.h"

namespace mlbench::runner {

class StoreRecorder {
 public:
  // `spec`: a file or postgresql:// URL; "" records nothing. `outdir`: the run's output
  // folder (report paths are recorded relative to it). Errors go to `err`.
  StoreRecorder(const std::string& spec, const store::RunRecord& run, const std::filesystem::path& outdir,
                std::ostream& err);

  bool enabled() const { return !spec_.empty(); }
  // Records a final report the runner wrote, of pass `pass`.
  void record(const FinalReport& report, int pass);
  // The run's end: "finished" or "interrupted".
  void finish(const std::string& status);
  // Whether any open or write failed (the exit code says so).
  bool failed() const { return failures_ > 0; }

 private:
  void fail(const std::string& what);

  std::string spec_;
  store::RunRecord run_;
  std::filesystem::path outdir_;
  std::ostream& err_;
  std::unique_ptr<store::ResultsStore> store_;
  int failures_ = 0;
};

// The run id a --resume continues: machine.json's "run_id" in `outdir` or `outdir`/R0;
// "" when there is none (a run directory from before the store).
std::string resumed_run_id(const std::filesystem::path& outdir);

}  // namespace mlbench::runner
