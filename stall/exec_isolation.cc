// The isolation of --exec's runs (see exec_isolation.h).
#include "exec_isolation.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/environment.h"
#include "exec_target.h"

namespace mlbench::stall {
namespace fs = std::filesystem;

const char* to_string(Isolation i) {
  switch (i) {
    case Isolation::Overlay:
      return "overlay";
    case Isolation::Workdir:
      return "workdir";
    case Isolation::WritesOk:
      return "none";
  }
  return "?";
}

namespace {

// The steps of the child's set-up, for the trial's message.
enum SetupStep : int {
  kUnshare = 1,
  kUserMap,
  kPrivate,
  kHold,
  kMount,
  kBind,
  kReadOnly,
  kChdir,
};
const char* step_text(int step) {
  switch (step) {
    case kUnshare:
      return "cannot make a mount namespace (unshare)";
    case kUserMap:
      return "cannot map this user into a user namespace";
    case kPrivate:
      return "cannot make the mounts private";
    case kHold:
      return "cannot open a folder to bind over the overlay";
    case kMount:
      return "cannot mount an overlay";
    case kBind:
      return "cannot bind a folder over the overlay";
    case kReadOnly:
      return "cannot make a mount below the working directory read-only";
    case kChdir:
      return "cannot enter the overlay";
  }
  return "set-up failed";
}

// What the child's set-up reads: made in the parent, read between fork and exec.
struct OverlaySetup {
  bool user_namespace = false;
  std::string uid_map, gid_map;
  std::string cwd;
  std::string options, userns_options;  // the overlay's, without and with a user namespace
  struct Bind {
    std::string path;
    bool read_only = false;
  };
  std::vector<Bind> binds;
  std::vector<int> fds;    // one per bind, sized here: the child writes into it, allocating nothing
  std::vector<char> proc;  // "/proc/self/fd/NNNNNNNNNN": the bind's source, written by the child
  int* step = nullptr;     // shared with the parent: the step that failed
};

// Async-signal-safe: writes `text` into `file` (a /proc file of this process).
int write_proc(const char* file, const std::string& text) {
  const int fd = ::open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : EIO);
  ::close(fd);
  return err;
}

// Async-signal-safe: "/proc/self/fd/<fd>" into `out`.
void fd_path(int fd, std::vector<char>& out) {
  static constexpr char kPrefix[] = "/proc/self/fd/";
  std::size_t at = 0;
  for (const char* p = kPrefix; *p; ++p) out[at++] = *p;
  char digits[16];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + fd % 10);
    fd /= 10;
  } while (fd > 0 && n < 15);
  while (n > 0) out[at++] = digits[--n];
  out[at] = '\0';
}

// Between fork and exec (async-signal-safe calls only): the mount namespace, the overlay over the
// working directory, OUT and the mounts below it bound again, the working directory entered
// anew (the one inherited is the folder under the overlay). 0, or the errno of the failed step.
int overlay_setup(const OverlaySetup& s) {
  const auto fail = [&](int step) {
    const int err = errno;
    if (s.step) *s.step = step;
    return err != 0 ? err : EIO;
  };
  bool user_namespace = s.user_namespace;
  if (!user_namespace && ::unshare(CLONE_NEWNS) != 0) {
    if (errno != EPERM) return fail(kUnshare);
    user_namespace = true;  // root without CAP_SYS_ADMIN (a container): a user namespace gives it one
  }
  if (user_namespace) {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return fail(kUnshare);
    const int e = write_proc("/proc/self/setgroups", "deny");
    if (e != 0 && e != ENOENT) {
      errno = e;
      return fail(kUserMap);
    }
    if (int err = write_proc("/proc/self/uid_map", s.uid_map); err != 0) {
      errno = err;
      return fail(kUserMap);
    }
    if (int err = write_proc("/proc/self/gid_map", s.gid_map); err != 0) {
      errno = err;
      return fail(kUserMap);
    }
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return fail(kPrivate);
  auto& fds = const_cast<std::vector<int>&>(s.fds);
  for (std::size_t i = 0; i < s.binds.size(); ++i) {
    fds[i] = ::open(s.binds[i].path.c_str(), O_PATH | O_CLOEXEC);
    if (fds[i] < 0) return fail(kHold);
  }
  const std::string& options = user_namespace ? s.userns_options : s.options;
  if (::mount("overlay", s.cwd.c_str(), "overlay", 0, options.c_str()) != 0) return fail(kMount);
  auto& proc = const_cast<std::vector<char>&>(s.proc);
  for (std::size_t i = 0; i < s.binds.size(); ++i) {
    fd_path(fds[i], proc);
    if (::mount(proc.data(), s.binds[i].path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return fail(kBind);
    ::close(fds[i]);
    if (s.binds[i].read_only) {
      struct statvfs v {};
      if (::statvfs(s.binds[i].path.c_str(), &v) != 0) return fail(kReadOnly);
      // A user namespace may not drop the flags the mount had (they are locked): keep them.
      const unsigned long kept =
          v.f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME);
      if (::mount(nullptr, s.binds[i].path.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | kept, nullptr) != 0) {
        return fail(kReadOnly);
      }
    }
  }
  if (::chdir(s.cwd.c_str()) != 0) return fail(kChdir);
  return 0;
}

// /proc/self/mountinfo's mount points strictly below `dir`, outermost only (a recursive bind
// brings the ones below them).
std::vector<fs::path> mounts_below(const fs::path& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::vector<fs::path> below;
  const std::string prefix = dir.string() == "/" ? "/" : dir.string() + "/";
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    if (!(fields >> id >> parent >> dev >> root >> point)) continue;
    std::string decoded;  // \040 and the like: octal escapes
    for (std::size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        decoded += static_cast<char>(std::strtol(point.substr(i + 1, 3).c_str(), nullptr, 8));
        i += 3;
      } else {
        decoded += point[i];
      }
    }
    if (decoded.rfind(prefix, 0) == 0 && decoded.size() > prefix.size()) below.emplace_back(decoded);
  }
  std::sort(below.begin(), below.end());
  below.erase(std::unique(below.begin(), below.end()), below.end());
  std::vector<fs::path> outer;
  for (const auto& p : below) {
    const bool nested = std::any_of(outer.begin(), outer.end(),
                                    [&](const fs::path& o) { return p.string().rfind(o.string() + "/", 0) == 0; });
    if (!nested) outer.push_back(p);
  }
  return outer;
}

bool below(const fs::path& inner, const fs::path& outer) {
  const std::string o = outer.string() == "/" ? "/" : outer.string() + "/";
  return inner.string().rfind(o, 0) == 0;
}

// Where an overlay cannot be had for these paths, why; "" when it can be tried.
std::string overlay_path_problem(const IsolationPlan& p) {
  if (p.cwd == "/") return "the working directory is / (an overlay over it would hide /proc and /dev)";
  for (const fs::path& path : {p.cwd, p.out}) {
    if (path.string().find_first_of(",:\\") != std::string::npos) {
      return fmt::format("{} has a ',', ':' or '\\' (which an overlay's options cannot hold)", path.string());
    }
  }
  return {};
}

bool exists_nofollow(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

bool opaque(const fs::path& dir) {
  char value[4] = {};
  for (const char* name : {"trusted.overlay.opaque", "user.overlay.opaque"}) {
    if (::lgetxattr(dir.c_str(), name, value, sizeof value) > 0 && value[0] == 'y') return true;
  }
  return false;
}

}  // namespace

// A folder's files (workdir): path -> what says it changed.
struct RunIsolation::Snapshot {
  struct Stat {
    std::uintmax_t size = 0;
    std::int64_t mtime_ns = 0;
    std::uint64_t inode = 0;
    bool operator==(const Stat&) const = default;
  };
  std::map<std::string, Stat> files;

  static Snapshot of(const fs::path& dir, const fs::path& skip) {
    Snapshot s;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      const fs::path& p = it->path();
      if (p == skip) {
        it.disable_recursion_pending();
        continue;
      }
      struct stat st {};
      if (::lstat(p.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
      s.files[p.string()] = {static_cast<std::uintmax_t>(st.st_size),
                             static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                             static_cast<std::uint64_t>(st.st_ino)};
    }
    return s;
  }
};

PlannedIsolation plan_isolation(const std::string& workdir, bool writes_ok, const fs::path& out) {
  PlannedIsolation planned;
  auto plan = std::make_unique<IsolationPlan>();
  std::error_code ec;
  plan->out = fs::weakly_canonical(fs::absolute(out), ec);
  if (ec) plan->out = fs::absolute(out);
  if (writes_ok && !workdir.empty()) {
    planned.refusal = "--exec-workdir and --exec-writes-ok exclude each other";
    return planned;
  }
  if (!workdir.empty()) {
    const fs::path dir = fs::absolute(workdir);
    if (!fs::is_directory(dir, ec)) {
      planned.refusal = fmt::format("--exec-workdir {}: {}", workdir,
                                    fs::exists(dir, ec) ? "not a folder" : "no such folder (make it first)");
      return planned;
    }
    plan->mode = Isolation::Workdir;
    plan->cwd = fs::canonical(dir, ec);
    if (ec) plan->cwd = dir;
    planned.plan = std::move(plan);
    return planned;
  }
  plan->cwd = fs::current_path(ec);
  if (writes_ok) {
    plan->mode = Isolation::WritesOk;
    planned.plan = std::move(plan);
    return planned;
  }
  plan->mode = Isolation::Overlay;
  plan->user_namespace = ::geteuid() != 0;
  plan->submounts = mounts_below(plan->cwd);
  std::string why = overlay_path_problem(*plan);
  const char* no_overlay = std::getenv(kNoOverlayEnv);
  if (why.empty() && no_overlay && *no_overlay && std::string(no_overlay) != "0") {
    why = fmt::format("{} is set", kNoOverlayEnv);
  }
  if (why.empty()) {
    // The trial: a child that sets up as a run will, then runs `true`.
    std::shared_ptr<const IsolationPlan> shared(plan.release());
    const fs::path trial = shared->out / "runs" / ".isolation-trial.writes";
    try {
      RunIsolation iso(shared, trial);
      core::ProcessSpec spec;
      spec.executable = find_executable("true", core::getenv_or("PATH", "/usr/bin:/bin"));
      if (spec.executable.empty()) spec.executable = "/bin/true";
      spec.output = core::Output::Null;
      iso.apply(spec);
      try {
        core::Process child(spec);
        const core::ExitStatus st = child.wait();
        if (!st.exited || st.code != 0)
          why = fmt::format("a trial in the overlay ended with status {}", st.shell_code());
      } catch (const core::ProcessError& e) {
        // "<true's path>: <child_setup_what>: <errno's text>": the step that failed and the errno's text.
        const std::string what = e.what();
        const auto at = what.rfind(": ");
        const std::string step = iso.setup_failure();
        why = fmt::format("{}: {}", step.empty() ? "cannot set up the overlay" : step,
                          at == std::string::npos ? what : what.substr(at + 2));
      }
      (void)iso.writes();
    } catch (const std::exception& e) {  // its folders could not be made
      why = e.what();
    }
    fs::remove_all(trial, ec);
    plan = std::make_unique<IsolationPlan>(*shared);
  }
  if (!why.empty()) {
    planned.refusal = fmt::format(
        "--exec runs the command several times in {}, where what it writes (a checkpoint, a log) would overwrite "
        "files of yours, and its writes cannot be kept from there by an overlay ({}); give --exec-workdir DIR (a "
        "scratch folder the command runs in) or --exec-writes-ok (what it writes there is harmless)",
        plan->cwd.string(), why);
    return planned;
  }
  planned.plan = std::move(plan);
  return planned;
}

RunIsolation::RunIsolation(std::shared_ptr<const IsolationPlan> plan, fs::path writes_dir)
    : plan_(std::move(plan)), writes_dir_(std::move(writes_dir)) {
  if (plan_->mode == Isolation::Workdir) {
    before_ = std::make_shared<const Snapshot>(Snapshot::of(plan_->cwd, plan_->out));
    return;
  }
  if (plan_->mode != Isolation::Overlay) return;
  writes_dir_ = fs::absolute(writes_dir_);
  std::error_code ec;
  fs::remove_all(writes_dir_, ec);
  upper_ = writes_dir_ / "upper";
  work_ = writes_dir_ / "work";
  fs::create_directories(upper_);
  fs::create_directories(work_);
  auto s = std::make_shared<OverlaySetup>();
  s->user_namespace = plan_->user_namespace;
  s->uid_map = fmt::format("{} {} 1\n", ::geteuid(), ::geteuid());
  s->gid_map = fmt::format("{} {} 1\n", ::getegid(), ::getegid());
  s->cwd = plan_->cwd.string();
  s->options = fmt::format("lowerdir={},upperdir={},workdir={}", s->cwd, upper_.string(), work_.string());
  s->userns_options = s->options + ",userxattr";
  for (const auto& m : plan_->submounts) s->binds.push_back({m.string(), true});
  if (below(plan_->out, plan_->cwd)) s->binds.push_back({plan_->out.string(), false});
  s->fds.assign(s->binds.size(), -1);
  s->proc.assign(64, '\0');
  void* shared = ::mmap(nullptr, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared != MAP_FAILED) {
    s->step = static_cast<int*>(shared);
    *s->step = 0;
  }
  setup_ = std::shared_ptr<const void>(s.get(), [s](const void*) {
    if (s->step) ::munmap(s->step, sizeof(int));
  });
}

void RunIsolation::apply(core::ProcessSpec& process) const {
  process.working_dir = plan_->cwd.string();
  if (plan_->mode != Isolation::Overlay) return;
  const auto* s = static_cast<const OverlaySetup*>(setup_.get());
  process.child_setup = [s, keep = setup_] {
    if (s->step) *s->step = 0;
    return overlay_setup(*s);
  };
  process.child_setup_what =
      fmt::format("cannot keep the command's writes from {} by an overlay in a mount namespace", plan_->cwd.string());
}

std::string RunIsolation::setup_failure() const {
  const auto* s = static_cast<const OverlaySetup*>(setup_.get());
  return s && s->step && *s->step != 0 ? step_text(*s->step) : "";
}

std::vector<FileWrite> RunIsolation::writes() const {
  std::vector<FileWrite> out;
  std::error_code ec;
  if (plan_->mode == Isolation::Workdir && before_) {
    const Snapshot after = Snapshot::of(plan_->cwd, plan_->out);
    for (const auto& [path, st] : after.files) {
      const auto was = before_->files.find(path);
      if (was == before_->files.end()) {
        out.push_back({path, "created"});
      } else if (!(was->second == st)) {
        out.push_back({path, "changed"});
      }
    }
    for (const auto& [path, st] : before_->files) {
      if (!after.files.count(path)) out.push_back({path, "deleted"});
    }
    return out;
  }
  if (plan_->mode != Isolation::Overlay) return out;
  for (auto it = fs::recursive_directory_iterator(upper_, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    const fs::path rel = p.lexically_relative(upper_);
    const fs::path lower = plan_->cwd / rel;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (S_ISCHR(st.st_mode) && st.st_rdev == 0) {
      out.push_back({lower.string(), "deleted"});  // a whiteout
    } else if (S_ISDIR(st.st_mode)) {
      if (opaque(p) && exists_nofollow(lower)) {
        out.push_back({lower.string(), "replaced"});
      } else if (!exists_nofollow(lower) && fs::is_empty(p, ec)) {
        out.push_back({lower.string(), "created"});
      }
    } else {
      out.push_back({lower.string(), exists_nofollow(lower) ? "changed" : "created"});
    }
  }
  // The overlay's work directory (its inner folder is mode 000) is of no use after the run.
  for (auto it = fs::directory_iterator(work_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ::chmod(it->path().c_str(), 0700);
  }
  fs::remove_all(work_, ec);
  return out;
}

void WriteLog::add(const std::string& run, const std::vector<FileWrite>& writes) {
  for (const auto& w : writes) {
    Entry& e = files_[w.path];
    if (e.change.empty()) e.change = w.change;
    if (e.runs.empty() || e.runs.back() != run) e.runs.push_back(run);
  }
}

nlohmann::json WriteLog::to_json(const IsolationPlan& plan) const {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& [path, e] : files_) files.push_back({{"path", path}, {"change", e.change}, {"runs", e.runs}});
  nlohmann::json j = {{"isolation", to_string(plan.mode)},
                      {"working_dir", plan.cwd.string()},
                      {"kept_in", nullptr},
                      {"files", plan.mode == Isolation::WritesOk ? nlohmann::json(nullptr) : files}};
  if (plan.mode == Isolation::Overlay) j["kept_in"] = (plan.out / "runs" / "<run>.writes" / "upper").string();
  return j;
}

std::string WriteLog::summary(const IsolationPlan& plan) const {
  const std::string dir = plan.cwd.string();
  if (plan.mode == Isolation::WritesOk) {
    return fmt::format("The command ran in {} as it is (--exec-writes-ok): what it wrote there is not tracked\n", dir);
  }
  std::string head;
  if (plan.mode == Isolation::Overlay) {
    head = files_.empty()
               ? fmt::format("The command wrote no file in {} (its runs were kept from it by an overlay)\n", dir)
               : fmt::format(
                     "Files the command wrote in {}, kept from it by an overlay (your files there are unchanged; "
                     "each run's writes are in {}):\n",
                     dir, (plan.out / "runs" / "<run>.writes" / "upper").string());
  } else {
    head = files_.empty() ? fmt::format("The command wrote no file in {} (--exec-workdir)\n", dir)
                          : fmt::format("Files the command wrote in {} (--exec-workdir):\n", dir);
  }
  constexpr std::size_t kShown = 20;
  std::size_t shown = 0;
  for (const auto& [path, e] : files_) {
    if (shown++ == kShown) {
      head += fmt::format("  ... and {} more (stall.json: exec.writes)\n", files_.size() - kShown);
      break;
    }
    std::string runs;
    for (std::size_t i = 0; i < e.runs.size() && i < 4; ++i) runs += (i ? ", " : "") + e.runs[i];
    if (e.runs.size() > 4) runs += fmt::format(" and {} more", e.runs.size() - 4);
    head += fmt::format("  {:<8} {}  (run{} {})\n", e.change, path, e.runs.size() > 1 ? "s" : "", runs);
  }
  return head;
}

}  // namespace mlbench::stall
