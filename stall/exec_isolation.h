// mlbench-stall --exec starts the user's command many times, in the folder it was started from:
// what the command writes there (a checkpoint at each epoch's end, a log, a results file) would
// overwrite the user's own files of the same names (docs/stall.md, "Your files"). So each run of
// the command is isolated:
//  - overlay (the default): the run starts in a mount namespace of its own (a user namespace too
//    when mlbench-stall is not root, or root without CAP_SYS_ADMIN) with an overlay mounted over
//    the working directory: the command reads everything that is there, and every write lands in
//    the run's upper directory, OUT/runs/<label>.writes/upper/. The analysis's own folder (OUT)
//    and mounts below the working directory are bound again over the overlay: OUT as it is, the
//    mounts read-only.
//  - workdir (--exec-workdir DIR): the command runs in DIR, a scratch folder the user named.
//  - writes-ok (--exec-writes-ok): the command runs where it was started; the user said its
//    writes are harmless.
// Where no overlay can be had (no privilege for a mount namespace, no overlay file system), the
// analysis refuses to start until the user picks one of the other two. Every file a run created,
// changed or deleted outside OUT is listed at the end (console and stall.json exec.writes).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/process.h"

namespace mlbench::stall {

enum class Isolation { Overlay, Workdir, WritesOk };
const char* to_string(Isolation i);

// Set (to anything but "" or "0") to act as where no overlay can be had: the refusal path,
// for tests and for a user who wants to pick --exec-workdir or --exec-writes-ok anyway.
inline constexpr const char* kNoOverlayEnv = "MLBENCH_STALL_NO_OVERLAY";

// How the runs of the command are isolated, decided once before the first run.
struct IsolationPlan {
  Isolation mode = Isolation::Overlay;
  std::filesystem::path cwd;  // where the command starts, absolute (workdir: the folder named)
  std::filesystem::path out;  // the analysis's folder, absolute
  // overlay: mounts strictly below cwd (bound again read-only over it) and whether a user
  // namespace is needed (not root).
  std::vector<std::filesystem::path> submounts;
  bool user_namespace = false;
};

// The plan for `workdir` / `writes_ok` (the flags) and OUT, or the one line that refuses to start
// (its error; exit 2). Overlay: a trial mount (a child that mounts the overlay as a run will,
// and exits) says whether it can be had.
struct PlannedIsolation {
  std::unique_ptr<IsolationPlan> plan;
  std::string refusal;
};
PlannedIsolation plan_isolation(const std::string& workdir, bool writes_ok, const std::filesystem::path& out);

// A file a run touched, relative to IsolationPlan::cwd.
struct FileWrite {
  std::string path;    // absolute, as the command saw it
  std::string change;  // "created", "changed", "deleted" or "replaced" (a folder deleted and made anew)
};

// One run's isolation: the process set-up before its start, what it wrote after its end.
class RunIsolation {
 public:
  // `writes_dir`: OUT/runs/<label>.writes (overlay: its upper and work directories; emptied first).
  RunIsolation(std::shared_ptr<const IsolationPlan> plan, std::filesystem::path writes_dir);
  // The run's working directory, and (overlay) the child set-up that mounts the overlay.
  void apply(core::ProcessSpec& process) const;
  // After the run ended: what it created, changed or deleted (overlay: its upper directory's
  // entries, whiteouts as deletions; workdir: the folder against its state before the run;
  // writes-ok: nothing is known). Removes the overlay's work directory.
  std::vector<FileWrite> writes() const;
  const std::filesystem::path& upper() const { return upper_; }
  // Overlay: after a start that failed in the set-up, the step that failed ("" otherwise).
  std::string setup_failure() const;

 private:
  struct Snapshot;
  std::shared_ptr<const IsolationPlan> plan_;
  std::filesystem::path writes_dir_, upper_, work_;
  std::shared_ptr<const Snapshot> before_;  // workdir
  std::shared_ptr<const void> setup_;       // overlay: the strings the child set-up reads
};

// Every run's writes, by path: the changes, and the runs that made them.
class WriteLog {
 public:
  void add(const std::string& run, const std::vector<FileWrite>& writes);
  bool empty() const { return files_.empty(); }
  // stall.json exec.writes: {"isolation", "working_dir", "kept_in", "files": [{path, change, runs}]}.
  nlohmann::json to_json(const IsolationPlan& plan) const;
  // The console's lines (a heading and one line a file; a line saying none when none).
  std::string summary(const IsolationPlan& plan) const;

 private:
  struct Entry {
    std::string change;
    std::vector<std::string> runs;
  };
  std::map<std::string, Entry> files_;
};

}  // namespace mlbench::stall
