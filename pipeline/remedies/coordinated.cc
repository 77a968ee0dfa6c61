// The coordinated-prep group's shared segment and protocol (pipeline/remedies/coordinated.h).
//
// Layout of /dev/shm/mlbench-coord-<group>: a header (Shared) with the group's
// settings, one process-shared robust mutex and condition variable, and one
// entry per member (pid, state, heartbeat); then one SlotMeta per ring slot;
// then the slots' bytes (a BatchHeader, the labels, the pixels).
//
// Why these primitives:
// - Slot and member state changes happen once per batch, so they sit under
//   one pthread mutex, PTHREAD_PROCESS_SHARED (it lives in the segment and is
//   used by every member's threads) and PTHREAD_MUTEX_ROBUST (a member killed
//   inside the few-instruction critical section must not hang the others: the
//   next locker gets EOWNERDEAD and marks it consistent). The mutex is also the
//   memory barrier that publishes a slot's bytes, written outside the lock.
// - Heartbeats are std::atomic<int64_t> in the segment, written without the
//   lock (a beating member never waits on a stuck one); lock-free atomics are
//   address-free, so they work across processes (checked by static_assert).
// - Waits use the shared condition variable with a short timeout, and every
//   change broadcasts: a member killed while waiting can swallow a signal, and
//   a dead member is only noticed by polling, so no wait depends on a wake-up.
// - Another process may damage the segment (truncate it, write into it). Sizes, counts and
//   indices are this member's own copies (options_), never read back from the segment; every lock
//   checks that the segment is intact (CoordinationGroup::damage), and a SIGBUS on the mapping
//   (a truncated segment) is caught and turned into that check's failure: each member fails with
//   one line naming the segment instead of dying of SIGBUS or reading past its mapping.
// - Creating, joining, removing a stale segment and the last member's removal
//   happen under flock() on the segment's file descriptor; after taking the
//   lock a process checks that the file it locked is still linked (st_nlink),
//   so two processes never both recreate the segment.
#include "pipeline/remedies/coordinated.h"

#include <fcntl.h>
#include <pwd.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "pipeline/data_error.h"
#include "pipeline/loader.h"
#include "pipeline/sampler.h"

namespace mlbench::pipeline {

namespace {

constexpr std::uint64_t kMagic = 0x6d6c62636f6f7264ULL;  // "mlbcoord"
constexpr std::uint32_t kLayoutVersion = 2;  // 2: the dataset's fingerprint
constexpr std::size_t kAlign = 64;

enum MemberState : std::int32_t { kEmpty = 0, kJoined = 1, kLeft = 2, kDropped = 3 };
enum SlotState : std::int32_t { kFree = 0, kBuilding = 1, kReady = 2 };

static_assert(std::atomic<std::int64_t>::is_always_lock_free, "heartbeats need address-free atomics");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the magic needs an address-free atomic");

struct alignas(kAlign) MemberEntry {
  std::atomic<std::int64_t> heartbeat_ns{0};  // written by its member without the lock
  std::int32_t state = kEmpty;                // the rest under the mutex
  std::int32_t pid = 0;
  std::uint64_t start_ticks = 0;  // /proc/<pid>/stat starttime: tells a reused pid apart
  char reason[112] = {};
};

struct SlotMeta {
  // The batch it holds or is being built for; when free, the last one it held
  // (slot i starts as if it had held batch i - slots). Batch s goes into slot
  // s % slots once that slot is free and held s - slots, so the ring keeps order.
  std::int64_t sequence = 0;
  std::int32_t state = kFree;
  std::int32_t builder = -1;
  std::uint64_t pending = 0;  // members yet to take the batch: the slot's reference count, as a mask
                              // so that dropping a member releases exactly its references
};

struct BatchHeader {
  std::int32_t size, channels, height, width, type;
  std::int64_t epoch, index, sequence;
  std::uint64_t data_bytes;
};

// A slot claimed for a batch that will not be published: free again, as it was before the claim.
void release_unbuilt(SlotMeta& m, int slots) {
  m.sequence -= slots;
  m.state = kFree;
  m.builder = -1;
  m.pending = 0;
}

std::size_t round_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// starttime (field 22) of /proc/<pid>/stat and whether the process is a zombie
// (a killed child not yet reaped still answers kill(pid, 0)).
struct ProcStat {
  bool found = false;
  bool zombie = false;
  std::uint64_t start_ticks = 0;
};
ProcStat proc_stat(long pid) {
  ProcStat s;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!in || !std::getline(in, line)) return s;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  // Fields after the command: 3 state, ..., 22 starttime.
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3) s.zombie = field == "Z" || field == "X";
    if (i == 22) {
      s.start_ticks = std::stoull(field);
      s.found = true;
    }
  }
  return s;
}

bool process_alive(long pid, std::uint64_t start_ticks) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  const ProcStat s = proc_stat(pid);
  if (!s.found) return true;  // no /proc: trust kill()
  return !s.zombie && (start_ticks == 0 || s.start_ticks == start_ticks);
}

std::string errno_text() {
  return std::strerror(errno);
}

// A segment truncated by another process (ftruncate, or a write to /dev/shm) while it is mapped:
// every access past its new end raises SIGBUS, which kills the process without a word. While a
// group has its segment mapped, a SIGBUS whose address falls in it is caught here: the mapping is
// replaced by zeroed private memory (so the faulting access, retried, completes), the fault is
// recorded, and the group's next check (CoordinationGroup::damage, under its lock and in every
// wait) turns it into a DataError naming the segment. A SIGBUS anywhere else goes on to the
// handler there was before (the default one: the process dies as it would have).
struct GuardedMapping {
  std::atomic<std::uintptr_t> start{0};
  std::atomic<std::size_t> bytes{0};
  std::atomic<int> faulted{0};
};
constexpr int kGuardedMappings = 32;
GuardedMapping g_guarded[kGuardedMappings];
struct sigaction g_previous_sigbus {};
std::once_flag g_sigbus_installed;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (GuardedMapping& m : g_guarded) {
    const std::uintptr_t start = m.start.load();
    const std::size_t bytes = m.bytes.load();
    if (start == 0 || address < start || address >= start + bytes) continue;
    const int saved = errno;
    void* p = ::mmap(reinterpret_cast<void*>(start), bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    errno = saved;
    if (p == MAP_FAILED) break;  // cannot make it readable: die as before
    m.faulted.store(1);
    return;
  }
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN &&
      (g_previous_sigbus.sa_flags & SA_SIGINFO) == 0) {
    g_previous_sigbus.sa_handler(sig);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);  // the access is retried and kills the process with SIGBUS, as before
}

// Registers a mapping with the SIGBUS guard; returns its entry (-1: the table is full, unguarded).
int guard_mapping(void* start, std::size_t bytes) {
  std::call_once(g_sigbus_installed, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous_sigbus);
  });
  for (int i = 0; i < kGuardedMappings; ++i) {
    std::uintptr_t expected = 0;
    if (g_guarded[i].start.compare_exchange_strong(expected, 1)) {  // claimed; 1 matches no address range yet
      g_guarded[i].faulted.store(0);
      g_guarded[i].bytes.store(bytes);
      g_guarded[i].start.store(reinterpret_cast<std::uintptr_t>(start));
      return i;
    }
  }
  return -1;
}

bool mapping_faulted(int entry) {
  return entry >= 0 && g_guarded[entry].faulted.load() != 0;
}

void unguard_mapping(int entry) {
  if (entry < 0) return;
  g_guarded[entry].bytes.store(0);
  g_guarded[entry].start.store(0);
}

}  // namespace

struct CoordinationGroup::Shared {
  std::atomic<std::uint64_t> magic{0};  // written last by the creator, under the flock
  std::uint32_t version = kLayoutVersion;
  std::int32_t members = 0, slots = 0;
  std::int32_t started = 0, joined = 0;
  std::uint64_t data_bytes = 0, max_labels = 0, fingerprint = 0, slot_stride = 0;
  std::uint64_t dataset = 0;  // GroupOptions::dataset
  std::int64_t created_ns = 0;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  MemberEntry member[kMaxCoordinatedMembers];

  SlotMeta* slot_meta() {
    return reinterpret_cast<SlotMeta*>(reinterpret_cast<std::uint8_t*>(this) + round_up(sizeof(Shared)));
  }
};

namespace {

std::size_t meta_bytes(int slots) {
  return round_up(sizeof(CoordinationGroup::Shared)) + round_up(sizeof(SlotMeta) * static_cast<std::size_t>(slots));
}
std::size_t stride(std::size_t data_bytes, std::size_t max_labels) {
  return round_up(sizeof(BatchHeader)) + round_up(max_labels * sizeof(std::int64_t)) + round_up(data_bytes);
}

}  // namespace

// The shared mutex as a scoped lock that tolerates a member killed while holding it. With a
// group, the lock waits in steps of 100 ms and checks between them, and once taken, that the
// segment is still intact (CoordinationGroup::check_intact): a segment that another process
// truncated or overwrote fails with one line naming it instead of hanging or crashing.
class CoordinationGroup::Lock {
 public:
  explicit Lock(Shared* s, const CoordinationGroup* group = nullptr) : s_(s), group_(group) { lock(); }
  ~Lock() {
    if (held_) pthread_mutex_unlock(&s_->mu);
  }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  void lock() {
    for (int attempt = 0;; ++attempt) {
      timespec until{};
      clock_gettime(CLOCK_MONOTONIC, &until);
      until.tv_nsec += 100'000'000;
      if (until.tv_nsec >= 1'000'000'000) {
        until.tv_nsec -= 1'000'000'000;
        ++until.tv_sec;
      }
      const int rc = pthread_mutex_clocklock(&s_->mu, CLOCK_MONOTONIC, &until);
      if (rc == 0 || rc == EOWNERDEAD) {
        if (rc == EOWNERDEAD) pthread_mutex_consistent(&s_->mu);  // its owner died inside a short critical section
        held_ = true;
        if (group_) {
          try {
            group_->check_intact();
          } catch (...) {
            unlock();
            throw;
          }
        }
        return;
      }
      if (group_) group_->check_intact();
      if (rc != ETIMEDOUT) {
        throw std::runtime_error(fmt::format("coordinated group: cannot lock the shared mutex: {}", std::strerror(rc)));
      }
      if (!group_ && attempt >= 600) {
        throw std::runtime_error("coordinated group: the shared mutex stayed locked for 60 s");
      }
    }
  }
  void unlock() {
    pthread_mutex_unlock(&s_->mu);
    held_ = false;
  }

 private:
  Shared* s_;
  const CoordinationGroup* group_;
  bool held_ = false;
};

std::int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string coordinated_segment_name(const std::string& group) {
  if (group.empty() || group.size() > 64) {
    throw std::invalid_argument("--group: a name of 1 to 64 characters is needed (got '" + group + "')");
  }
  for (char c : group) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      throw std::invalid_argument("--group '" + group + "': only letters, digits, '.', '_' and '-' are allowed");
    }
  }
  return fmt::format("/mlbench-coord-{}-{}", static_cast<unsigned long>(::geteuid()), group);
}

namespace {

// The owner of an open segment, as one line when it is not this user, else "".
std::string foreign_owner(int fd, const std::string& name) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fmt::format("cannot stat /dev/shm{}: {}", name, errno_text());
  if (st.st_uid == ::geteuid()) return {};
  const passwd* pw = ::getpwuid(st.st_uid);
  return fmt::format(
      "coordinated group: /dev/shm{} belongs to user {} (uid {}), not to this user (uid {}): a group is private to "
      "the user who created it, and this process will not read batches another user wrote; remove the file or pick "
      "another --group",
      name, pw ? pw->pw_name : "?", static_cast<unsigned long>(st.st_uid), static_cast<unsigned long>(::geteuid()));
}

}  // namespace

nlohmann::json to_json(const GroupReport& r) {
  nlohmann::json dropped = nlohmann::json::array();
  for (const auto& d : r.dropped) dropped.push_back({{"member", d.member}, {"pid", d.pid}, {"reason", d.reason}});
  return {{"group", r.group},
          {"members", r.members},
          {"member", r.member},
          {"joined", r.joined},
          {"slots", r.slots},
          {"slot_bytes", r.slot_bytes},
          {"batches_prepped", r.prepped},
          {"batches_taken_over", r.taken_over},
          {"batches_consumed", r.consumed},
          {"wait_s", r.wait_s},
          {"slot_wait_s", r.slot_wait_s},
          {"members_dropped", dropped},
          {"stale_segment_removed", r.stale_segment_removed},
          {"stale_segments_removed", r.stale_segments_removed}};
}

CoordinationGroup::CoordinationGroup(GroupOptions options) : options_(std::move(options)) {
  name_ = coordinated_segment_name(options_.group);
  if (options_.members < 1 || options_.members > kMaxCoordinatedMembers) {
    throw std::invalid_argument(
        fmt::format("--coordinated {}: between 1 and {} members", options_.members, kMaxCoordinatedMembers));
  }
  if (options_.slots < 1) throw std::invalid_argument("coordinated group: at least one slot is needed");
  if (options_.timeout_ns <= 0) throw std::invalid_argument("--coordinated-timeout must be > 0");
  if (!options_.clock) options_.clock = monotonic_ns;
  slot_stride_ = stride(options_.data_bytes, options_.max_labels);
  try {
    remove_stale_groups();
    open_or_create();
  } catch (...) {
    unguard_mapping(guard_);
    if (map_) ::munmap(map_, map_bytes_);
    if (fd_ >= 0) ::close(fd_);
    shared_ = nullptr;
    left_ = true;
    throw;
  }
  if (options_.heartbeat_thread) beat_thread_ = std::thread([this] { heartbeat_loop(); });
  try {
    wait_for_members();
  } catch (...) {
    leave();
    throw;
  }
}

CoordinationGroup::~CoordinationGroup() {
  leave();
}

bool CoordinationGroup::stale(Shared* s, std::size_t size) {
  if (size < sizeof(Shared) || s->magic.load() != kMagic || s->version != kLayoutVersion) return true;
  Lock lock(s);
  for (int i = 0; i < s->members && i < kMaxCoordinatedMembers; ++i) {
    if (s->member[i].state == kJoined && process_alive(s->member[i].pid, s->member[i].start_ticks)) return false;
  }
  return true;
}

void CoordinationGroup::remove_stale_groups() {
  const std::string prefix = fmt::format("mlbench-coord-{}-", static_cast<unsigned long>(::geteuid()));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string file = entry.path().filename().string();
    const std::string name = "/" + file;
    if (file.rfind(prefix, 0) != 0 || name == name_) continue;  // this group's own: open_or_create decides
    const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_uid != ::geteuid() || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);  // another user's, or being set up or cleaned right now
      continue;
    }
    bool dead = true;  // a segment too small to hold a header is one whose creator died
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size >= sizeof(Shared)) {
      void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        dead = stale(static_cast<Shared*>(m), size);
        ::munmap(m, size);
      }
    }
    if (dead && ::shm_unlink(name.c_str()) == 0) ++stale_groups_removed_;
    ::flock(fd, LOCK_UN);
    ::close(fd);
  }
}

void CoordinationGroup::open_or_create() {
  const std::size_t total = meta_bytes(options_.slots) + slot_stride_ * static_cast<std::size_t>(options_.slots);
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Created here (O_EXCL, 0600), or opened without O_CREAT and checked to be this user's:
    // a segment another user made under this name is never joined nor written.
    fd_ = ::shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd_ >= 0) {
      ::fchmod(fd_, 0600);  // whatever the umask
    } else if (errno == EEXIST) {
      fd_ = ::shm_open(name_.c_str(), O_RDWR, 0);
      if (fd_ < 0 && errno == ENOENT) continue;  // removed meanwhile: create it
    }
    if (fd_ < 0) throw DataError(fmt::format("coordinated group: cannot open /dev/shm{}: {}", name_, errno_text()));
    if (std::string why = foreign_owner(fd_, name_); !why.empty()) {
      ::close(fd_);
      fd_ = -1;
      throw DataError(why);
    }
    if (::flock(fd_, LOCK_EX) != 0) {
      throw DataError(fmt::format("coordinated group: cannot lock /dev/shm{}: {}", name_, errno_text()));
    }
    struct stat st {};
    ::fstat(fd_, &st);
    if (st.st_nlink == 0) {  // removed by another process while we waited for the lock: open it anew
      ::close(fd_);
      fd_ = -1;
      continue;
    }
    bool fresh = st.st_size == 0;
    if (!fresh) {
      // An existing segment: a running group to join, or a stale one to remove.
      const auto size = static_cast<std::size_t>(st.st_size);
      void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
      if (m == MAP_FAILED)
        throw DataError(fmt::format("coordinated group: cannot map /dev/shm{}: {}", name_, errno_text()));
      auto* s = static_cast<Shared*>(m);
      if (stale(s, size)) {
        // Every member of that run is gone (killed): remove its segment and start afresh.
        ::munmap(m, size);
        ::shm_unlink(name_.c_str());
        ::close(fd_);
        fd_ = -1;
        stale_removed_ = true;
        continue;
      }
      if (s->dataset != options_.dataset) {
        const std::string why = fmt::format(
            "coordinated group '{}' runs over another dataset (every member needs the same files: dataset "
            "{:016x}, this process's {:016x}); give it another --group",
            options_.group, s->dataset, options_.dataset);
        ::munmap(m, size);
        ::close(fd_);
        fd_ = -1;
        throw DataError(why);
      }
      if (s->fingerprint != options_.fingerprint || s->members != options_.members || s->slots != options_.slots ||
          s->data_bytes != options_.data_bytes || s->max_labels != options_.max_labels) {
        const std::string why = fmt::format(
            "coordinated group '{}' runs with other settings (every member needs the same --coordinated, "
            "--seed, --batch-size, --image-size, --output and dataset; group: K={} slots={} batch bytes={} "
            "labels={} settings {:016x}, this process: K={} slots={} batch bytes={} labels={} settings {:016x})",
            options_.group, s->members, s->slots, s->data_bytes, s->max_labels, s->fingerprint, options_.members,
            options_.slots, options_.data_bytes, options_.max_labels, options_.fingerprint);
        ::munmap(m, size);
        ::close(fd_);
        fd_ = -1;
        throw DataError(why);
      }
      map_ = m;
      map_bytes_ = size;
      guard_ = guard_mapping(m, size);
      shared_ = s;
    } else {
      if (::ftruncate(fd_, static_cast<off_t>(total)) != 0) {
        throw DataError(
            fmt::format("coordinated group: cannot size /dev/shm{} to {} bytes: {}", name_, total, errno_text()));
      }
      void* m = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
      if (m == MAP_FAILED)
        throw DataError(fmt::format("coordinated group: cannot map /dev/shm{}: {}", name_, errno_text()));
      map_ = m;
      map_bytes_ = total;
      guard_ = guard_mapping(m, total);
      shared_ = new (m) Shared();
      pthread_mutexattr_t ma;
      pthread_mutexattr_init(&ma);
      pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
      pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
      pthread_mutex_init(&shared_->mu, &ma);
      pthread_mutexattr_destroy(&ma);
      pthread_condattr_t ca;
      pthread_condattr_init(&ca);
      pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
      pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
      pthread_cond_init(&shared_->cv, &ca);
      pthread_condattr_destroy(&ca);
      shared_->members = options_.members;
      shared_->slots = options_.slots;
      shared_->data_bytes = options_.data_bytes;
      shared_->max_labels = options_.max_labels;
      shared_->fingerprint = options_.fingerprint;
      shared_->dataset = options_.dataset;
      shared_->slot_stride = slot_stride_;
      shared_->created_ns = options_.clock();
      SlotMeta* meta = shared_->slot_meta();
      for (int i = 0; i < options_.slots; ++i) {
        new (&meta[i]) SlotMeta();
        meta[i].sequence = i - options_.slots;
      }
      shared_->magic.store(kMagic);
    }
    slot_data_ = static_cast<std::uint8_t*>(map_) + meta_bytes(options_.slots);
    {
      Lock lock(shared_, this);
      if (shared_->started) {
        std::string pids;
        for (int i = 0; i < options_.members; ++i) {
          if (shared_->member[i].state == kJoined) pids += fmt::format(" {}", shared_->member[i].pid);
        }
        lock.unlock();
        ::flock(fd_, LOCK_UN);
        throw DataError(
            fmt::format("coordinated group '{}' is already running (pids{}): start its {} members "
                        "together, or pick another --group",
                        options_.group, pids, options_.members));
      }
      for (int i = 0; i < options_.members; ++i) {
        if (shared_->member[i].state == kEmpty) {
          member_ = i;
          break;
        }
      }
      if (member_ < 0) {
        lock.unlock();
        ::flock(fd_, LOCK_UN);
        throw DataError(
            fmt::format("coordinated group '{}' already has its {} members", options_.group, options_.members));
      }
      MemberEntry& me = shared_->member[member_];
      me.pid = static_cast<std::int32_t>(::getpid());
      me.start_ticks = proc_stat(::getpid()).start_ticks;
      me.heartbeat_ns.store(options_.clock());
      me.state = kJoined;
      ++shared_->joined;
      pthread_cond_broadcast(&shared_->cv);
    }
    ::flock(fd_, LOCK_UN);
    return;
  }
  throw DataError(fmt::format("coordinated group: /dev/shm{} keeps being removed while opening it", name_));
}

void CoordinationGroup::wait_for_members() {
  Lock lock(shared_, this);
  while (!shared_->started) {
    if (shared_->joined >= options_.members || options_.clock() - shared_->created_ns > options_.join_timeout_ns) {
      // Those that did not come in time stay out (kEmpty is never live).
      shared_->started = 1;
      pthread_cond_broadcast(&shared_->cv);
      break;
    }
    if (stopping_) throw std::runtime_error("the loader was stopped");
    check_intact();
    drop_dead_members();
    wait_a_while();
  }
}

bool CoordinationGroup::live(int m) const {
  // `m` may come from the segment (a slot's builder): bounded, so that a damaged one reads no further.
  return m >= 0 && m < options_.members && shared_->member[m].state == kJoined;
}

int CoordinationGroup::owner_of(long sequence) const {
  const int k = options_.members;
  const int primary = static_cast<int>(sequence % k);
  if (live(primary)) return primary;
  std::vector<int> alive;
  for (int i = 0; i < k; ++i) {
    if (live(i)) alive.push_back(i);
  }
  if (alive.empty()) return member_;
  return alive[static_cast<std::size_t>(sequence % static_cast<long>(alive.size()))];
}

void CoordinationGroup::free_if_done(int slot) {
  SlotMeta& m = shared_->slot_meta()[slot];
  if (m.state == kReady && m.pending == 0) {
    m.state = kFree;  // keeps `sequence`: the last batch it held
    m.builder = -1;
    pthread_cond_broadcast(&shared_->cv);
  }
}

void CoordinationGroup::drop(int m, const std::string& reason) {
  MemberEntry& e = shared_->member[m];
  e.state = kDropped;
  std::snprintf(e.reason, sizeof(e.reason), "%s", reason.c_str());
  const std::uint64_t bit = std::uint64_t{1} << m;
  SlotMeta* meta = shared_->slot_meta();
  for (int i = 0; i < options_.slots; ++i) {
    if (meta[i].state == kBuilding && meta[i].builder == m) {
      release_unbuilt(meta[i], options_.slots);  // never published: the new owner builds it
    } else {
      meta[i].pending &= ~bit;
      free_if_done(i);
    }
  }
  pthread_cond_broadcast(&shared_->cv);
}

int CoordinationGroup::drop_dead_members() {
  const std::int64_t now = options_.clock();
  int dropped = 0;
  for (int i = 0; i < options_.members; ++i) {
    if (i == member_ || shared_->member[i].state != kJoined) continue;
    const MemberEntry& e = shared_->member[i];
    if (!process_alive(e.pid, e.start_ticks)) {
      drop(i, fmt::format("exited (pid {} is gone)", e.pid));
      ++dropped;
      continue;
    }
    const std::int64_t age = now - e.heartbeat_ns.load();
    if (age > options_.timeout_ns) {
      drop(i, fmt::format("stalled: no heartbeat for {:.1f} s (timeout {:.1f} s)", static_cast<double>(age) * 1e-9,
                          static_cast<double>(options_.timeout_ns) * 1e-9));
      ++dropped;
    }
  }
  return dropped;
}

void CoordinationGroup::check_not_dropped() const {
  const MemberEntry& me = shared_->member[member_];
  if (me.state == kDropped) {
    throw DataError(fmt::format("this process was dropped from coordinated group '{}': {}", options_.group, me.reason));
  }
}

std::string CoordinationGroup::damage() const {
  if (!shared_) return {};
  const std::string path = "/dev/shm" + name_;
  struct stat st {};
  const bool sized = ::fstat(fd_, &st) == 0;
  if (mapping_faulted(guard_) || (sized && static_cast<std::size_t>(st.st_size) < map_bytes_)) {
    return fmt::format("another process truncated its shared-memory segment {} (to {} bytes; the group made it {})",
                       path, sized ? std::to_string(st.st_size) : std::string("?"), map_bytes_);
  }
  const Shared* s = shared_;
  if (s->magic.load() != kMagic || s->version != kLayoutVersion || s->members != options_.members ||
      s->slots != options_.slots || s->data_bytes != options_.data_bytes || s->max_labels != options_.max_labels ||
      s->fingerprint != options_.fingerprint || s->dataset != options_.dataset || s->slot_stride != slot_stride_ ||
      (s->started != 0 && s->started != 1) || s->joined < 0 || s->joined > s->members) {
    return fmt::format(
        "another process overwrote the header of its shared-memory segment {} (its magic, layout or settings are no "
        "longer the group's)",
        path);
  }
  if (member_ >= 0 && s->member[member_].pid != static_cast<std::int32_t>(::getpid())) {
    return fmt::format(
        "another process overwrote the member table of its shared-memory segment {} (member {} is no longer this "
        "process)",
        path, member_);
  }
  return {};
}

void CoordinationGroup::check_intact() const {
  if (!shared_) return;
  const std::string why = damage();
  if (why.empty()) return;
  damaged_ = true;
  throw DataError(
      fmt::format("coordinated group '{}': {}; this member stops, as the batches in it can no longer be trusted",
                  options_.group, why));
}

void CoordinationGroup::wait_a_while() {
  // Short enough to notice a dead member soon, long enough not to spin.
  const std::int64_t poll = std::clamp<std::int64_t>(options_.timeout_ns / 4, 1'000'000, 20'000'000);
  const std::int64_t until = monotonic_ns() + poll;
  timespec ts{static_cast<time_t>(until / 1'000'000'000), static_cast<long>(until % 1'000'000'000)};
  const int rc = pthread_cond_timedwait(&shared_->cv, &shared_->mu, &ts);
  if (rc == EOWNERDEAD) pthread_mutex_consistent(&shared_->mu);
}

void CoordinationGroup::write_slot(int index, const Batch& b) {
  if (b.data.bytes > options_.data_bytes || static_cast<std::size_t>(b.size) > options_.max_labels) {
    throw std::logic_error("coordinated group: a batch larger than the ring's slots");
  }
  std::uint8_t* bytes = slot_data_ + slot_stride_ * static_cast<std::size_t>(index);
  auto* h = reinterpret_cast<BatchHeader*>(bytes);
  *h = BatchHeader{b.size,  b.channels, b.height,   b.width,     static_cast<std::int32_t>(b.type),
                   b.epoch, b.index,    b.sequence, b.data.bytes};
  std::uint8_t* labels = bytes + round_up(sizeof(BatchHeader));
  std::memcpy(labels, b.labels.data(), b.labels.size() * sizeof(std::int64_t));
  std::memcpy(labels + round_up(options_.max_labels * sizeof(std::int64_t)), b.data.data, b.data.bytes);
}

bool CoordinationGroup::build_one_ahead(Lock& lock, long sequence, long end,
                                        const std::function<Batch(long)>& build_ahead) {
  const int slots = options_.slots;
  // At most two rounds of the group ahead: one batch of its own per round is
  // what a member must build to keep up, and an endless loader (no `end`)
  // wastes at most these when the run stops.
  const long horizon = sequence + std::min<long>(slots - 1, 2L * options_.members);
  for (long s = sequence + 1; s <= horizon && (end < 0 || s < end); ++s) {
    const int index = static_cast<int>(s % slots);
    SlotMeta& meta = shared_->slot_meta()[index];
    if (owner_of(s) != member_ || meta.state != kFree || meta.sequence != s - slots) continue;
    meta.sequence = s;
    meta.state = kBuilding;
    meta.builder = member_;
    meta.pending = 0;
    for (int i = 0; i < options_.members; ++i) {
      if (live(i)) meta.pending |= std::uint64_t{1} << i;  // this member too: it takes the batch later
    }
    lock.unlock();
    try {
      write_slot(index, build_ahead(s));
    } catch (...) {
      lock.lock();
      if (meta.sequence == s && meta.builder == member_) release_unbuilt(meta, slots);
      pthread_cond_broadcast(&shared_->cv);
      throw;
    }
    lock.lock();
    if (meta.sequence == s && meta.builder == member_ && meta.state == kBuilding) {
      meta.state = kReady;
      pthread_cond_broadcast(&shared_->cv);
    }
    prepped_.fetch_add(1);
    if (static_cast<int>(s % options_.members) != member_) taken_over_.fetch_add(1);
    return true;
  }
  return false;
}

Batch CoordinationGroup::acquire(long sequence, const std::function<Batch()>& build,
                                 const std::function<HostBuffer(std::size_t)>& allocate,
                                 const std::function<Batch(long)>& build_ahead, long end) {
  using Clock = std::chrono::steady_clock;
  const int index = static_cast<int>(sequence % options_.slots);
  SlotMeta& meta = shared_->slot_meta()[index];
  const std::uint8_t* bytes = slot_data_ + slot_stride_ * static_cast<std::size_t>(index);
  const std::uint64_t my_bit = std::uint64_t{1} << member_;
  Lock lock(shared_, this);
  for (;;) {
    if (stopping_) throw std::runtime_error("the loader was stopped");
    check_intact();  // also after a wait: the condition variable's wait takes the mutex back unchecked
    check_not_dropped();
    if (meta.sequence == sequence && meta.state == kReady) {
      // Another member's batch: copy it out (our pending bit keeps the slot from reuse meanwhile).
      lock.unlock();
      const BatchHeader header = *reinterpret_cast<const BatchHeader*>(bytes);
      const BatchHeader* h = &header;
      if (h->size < 0 || static_cast<std::size_t>(h->size) > options_.max_labels ||
          h->data_bytes > options_.data_bytes || h->sequence != sequence) {
        damaged_ = true;
        check_intact();  // a truncated segment reads as zeros: say that
        throw DataError(fmt::format(
            "coordinated group '{}': another process overwrote slot {} of its shared-memory segment /dev/shm{} (it "
            "holds {} labels and {} bytes for batch {}, not batch {} of at most {} labels and {} bytes); this member "
            "stops, as the batches in it can no longer be trusted",
            options_.group, index, name_, h->size, h->data_bytes, h->sequence, sequence, options_.max_labels,
            options_.data_bytes));
      }
      Batch b;
      b.size = h->size;
      b.channels = h->channels;
      b.height = h->height;
      b.width = h->width;
      b.type = static_cast<OutputType>(h->type);
      b.epoch = h->epoch;
      b.index = h->index;
      b.sequence = h->sequence;
      b.labels.resize(static_cast<std::size_t>(h->size));
      const std::uint8_t* labels = bytes + round_up(sizeof(BatchHeader));
      std::memcpy(b.labels.data(), labels, b.labels.size() * sizeof(std::int64_t));
      b.data = allocate(h->data_bytes);
      std::memcpy(b.data.data, labels + round_up(options_.max_labels * sizeof(std::int64_t)), h->data_bytes);
      lock.lock();
      meta.pending &= ~my_bit;
      free_if_done(index);
      consumed_.fetch_add(1);
      return b;
    }
    const bool claim_building = meta.sequence == sequence && meta.state == kBuilding && !live(meta.builder);
    const bool claim_free =
        meta.state == kFree && meta.sequence == sequence - options_.slots && owner_of(sequence) == member_;
    if (meta.sequence > sequence) {
      check_intact();
      throw DataError(fmt::format(
          "coordinated group '{}': slot {} of its shared-memory segment /dev/shm{} moved past batch {} without member "
          "{} (another process wrote into the segment?)",
          options_.group, index, name_, sequence, member_));
    }
    if (claim_building || claim_free) {
      const bool takeover = static_cast<int>(sequence % options_.members) != member_;
      meta.sequence = sequence;
      meta.state = kBuilding;
      meta.builder = member_;
      meta.pending = 0;
      for (int i = 0; i < options_.members; ++i) {
        if (live(i) && i != member_) meta.pending |= std::uint64_t{1} << i;
      }
      lock.unlock();
      Batch b;
      try {
        b = build();
      } catch (...) {
        lock.lock();
        if (meta.sequence == sequence && meta.builder == member_) release_unbuilt(meta, options_.slots);
        pthread_cond_broadcast(&shared_->cv);
        throw;
      }
      write_slot(index, b);
      lock.lock();
      if (meta.sequence == sequence && meta.builder == member_ && meta.state == kBuilding) {
        meta.state = kReady;
        free_if_done(index);  // no other live member: free at once
        pthread_cond_broadcast(&shared_->cv);
      }
      prepped_.fetch_add(1);
      if (takeover) taken_over_.fetch_add(1);
      consumed_.fetch_add(1);
      return b;
    }
    // Rather than wait idle, build one of this member's next batches (its slot free).
    if (build_ahead && build_one_ahead(lock, sequence, end, build_ahead)) continue;
    // Waiting: for another member's batch, or (ours to build) for the slot's older batch to be taken by all.
    const bool ours = meta.sequence < sequence && owner_of(sequence) == member_;
    const auto t0 = Clock::now();
    const std::int64_t now = options_.clock();
    if (now - last_check_ns_ >= std::min<std::int64_t>(options_.timeout_ns / 4, 20'000'000)) {
      last_check_ns_ = now;
      drop_dead_members();
    }
    wait_a_while();
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    (ours ? slot_wait_ns_ : wait_ns_).fetch_add(waited);
  }
}

void CoordinationGroup::beat() {
  if (shared_ && member_ >= 0 && !left_) shared_->member[member_].heartbeat_ns.store(options_.clock());
}

void CoordinationGroup::heartbeat_loop() {
  const auto every = std::chrono::nanoseconds(std::max<std::int64_t>(options_.timeout_ns / 5, 1'000'000));
  std::unique_lock<std::mutex> lock(beat_mu_);
  while (!beat_stop_) {
    beat();
    beat_cv_.wait_for(lock, every, [&] { return beat_stop_; });
  }
}

void CoordinationGroup::stop() {
  stopping_ = true;
  if (shared_ && !left_ && !damaged_) {
    try {
      Lock lock(shared_, this);
      pthread_cond_broadcast(&shared_->cv);
    } catch (const std::exception&) {
      // A damaged segment: acquire() says so; its waiters see stopping_ at their next poll.
    }
  }
}

GroupReport CoordinationGroup::report() const {
  GroupReport r;
  r.group = options_.group;
  r.members = options_.members;
  r.member = member_;
  r.slots = options_.slots;
  r.slot_bytes = slot_stride_;
  r.prepped = prepped_.load();
  r.taken_over = taken_over_.load();
  r.consumed = consumed_.load();
  r.wait_s = static_cast<double>(wait_ns_.load()) * 1e-9;
  r.slot_wait_s = static_cast<double>(slot_wait_ns_.load()) * 1e-9;
  r.stale_segment_removed = stale_removed_;
  r.stale_segments_removed = stale_groups_removed_;
  if (shared_ && !left_ && !damaged_) {
    try {
      Lock lock(shared_, this);
      r.joined = shared_->joined;
      for (int i = 0; i < options_.members; ++i) {
        const MemberEntry& e = shared_->member[i];
        if (e.state == kDropped) r.dropped.push_back({i, e.pid, e.reason});
      }
    } catch (const std::exception&) {
      // A damaged segment (the run's failure names it): what this process counted itself stands.
      r.joined = 0;
      r.dropped.clear();
    }
  }
  return r;
}

void CoordinationGroup::leave() {
  {
    std::lock_guard<std::mutex> lock(beat_mu_);
    beat_stop_ = true;
  }
  beat_cv_.notify_all();
  if (beat_thread_.joinable()) beat_thread_.join();
  if (left_ || !shared_) return;
  // A damaged segment is left as it is (the next group's start removes it as stale) and stays
  // mapped: this process's robust-mutex list may still point into it. Leaving never throws: it
  // runs in destructors, after the run's failure was reported.
  bool intact = !damaged_ && damage().empty();
  if (intact) {
    ::flock(fd_, LOCK_EX);  // no process joins or recreates the segment meanwhile
    try {
      leave_segment();
    } catch (const std::exception&) {
      intact = false;
    }
    ::flock(fd_, LOCK_UN);
  }
  left_ = true;
  if (intact) {
    unguard_mapping(guard_);
    ::munmap(map_, map_bytes_);
  }
  ::close(fd_);
  shared_ = nullptr;
  fd_ = -1;
}

void CoordinationGroup::leave_segment() {
  {
    Lock lock(shared_, this);
    if (member_ >= 0 && shared_->member[member_].state == kJoined) {
      shared_->member[member_].state = kLeft;
      const std::uint64_t bit = std::uint64_t{1} << member_;
      SlotMeta* meta = shared_->slot_meta();
      for (int i = 0; i < options_.slots; ++i) {
        if (meta[i].state == kBuilding && meta[i].builder == member_) {
          release_unbuilt(meta[i], options_.slots);
        } else {
          meta[i].pending &= ~bit;
          free_if_done(i);
        }
      }
    }
    bool anyone = false;
    for (int i = 0; i < options_.members; ++i) anyone = anyone || shared_->member[i].state == kJoined;
    // The last one out (members dropped or left) removes the segment; a waiting
    // joiner sees st_nlink == 0 and creates a new one.
    if (!anyone) ::shm_unlink(name_.c_str());
    pthread_cond_broadcast(&shared_->cv);
  }
}

CoordinatedDataset::CoordinatedDataset(std::shared_ptr<Dataset<Batch>> inner, GroupOptions options,
                                       HostAllocator allocator, std::optional<EpochPlan> plan)
    : inner_(std::move(inner)), options_(std::move(options)), plan_(std::move(plan)), pool_(std::move(allocator)) {}

BatchRequest CoordinatedDataset::request(long sequence, int worker) {
  BatchRequest r;
  r.sequence = sequence;
  r.epoch = sequence / static_cast<long>(plan_->batches_per_epoch);
  r.index = sequence % static_cast<long>(plan_->batches_per_epoch);
  std::shared_ptr<const std::vector<std::size_t>> order;
  {
    std::lock_guard<std::mutex> lock(orders_mu_);
    auto& o = orders_[r.epoch];
    if (!o) o = std::make_shared<const std::vector<std::size_t>>(plan_->sampler.epoch_indices(r.epoch));
    order = o;
    while (orders_.size() > 3) orders_.erase(orders_.begin());
  }
  // The request points into the order: keep it alive for the build (one per worker thread).
  thread_local std::shared_ptr<const std::vector<std::size_t>> held;
  held = order;
  r.order = held.get();
  r.first = static_cast<std::size_t>(r.index) * plan_->batch_size;
  r.count = std::min<std::size_t>(plan_->batch_size, order->size() - r.first);
  r.worker = worker;
  return r;
}

CoordinatedDataset::~CoordinatedDataset() {
  leave();
}

void CoordinatedDataset::prepare(const BuildSetup& setup) {
  inner_->prepare(setup);
  pool_.set_capacity(static_cast<std::size_t>(setup.prefetch + setup.builders + 4));
  group_ = std::make_unique<CoordinationGroup>(options_);
}

Batch CoordinatedDataset::get_batch(const BatchRequest& request_in) {
  // Not the loader's next batch: which batch this member builds next is the group's plan.
  BatchRequest r = request_in;
  r.claim_next = nullptr;
  std::function<Batch(long)> ahead;
  if (plan_) ahead = [&](long s) { return inner_->get_batch(request(s, r.worker)); };
  return group_->acquire(
      r.sequence, [&] { return inner_->get_batch(r); }, [&](std::size_t bytes) { return pool_.allocate(bytes); }, ahead,
      plan_ ? plan_->end : -1);
}

void CoordinatedDataset::stop() {
  if (group_) group_->stop();
  inner_->stop();
}

void CoordinatedDataset::leave() {
  if (!group_) return;
  final_ = std::make_unique<GroupReport>(group_->report());
  group_.reset();
}

nlohmann::json CoordinatedDataset::to_json() const {
  if (group_) return pipeline::to_json(group_->report());
  if (final_) return pipeline::to_json(*final_);
  return nullptr;
}

std::shared_ptr<CoordinatedDataset> coordinated_dataset(std::shared_ptr<ImageDataset> dataset,
                                                        const LoaderConfig& config) {
  const CoordinatedConfig& c = config.coordinated;
  GroupOptions o;
  o.group = c.group;
  o.members = c.members;
  o.slots = c.slots > 0 ? c.slots : 2 * effective_prefetch(config.prefetch, config.workers) + c.members;
  const std::size_t elem = config.transform.output == OutputType::Float32 ? sizeof(float) : 1;
  const auto side = static_cast<std::size_t>(config.transform.image_size);
  o.max_labels = static_cast<std::size_t>(config.batch_size);
  o.data_bytes = static_cast<std::size_t>(dataset->channels()) * side * side * elem * o.max_labels;
  std::uint64_t f = mix_seed(config.seed, dataset->size());
  for (std::uint64_t v :
       {static_cast<std::uint64_t>(config.batch_size), static_cast<std::uint64_t>(config.transform.image_size),
        static_cast<std::uint64_t>(config.transform.output), static_cast<std::uint64_t>(config.transform.mode),
        static_cast<std::uint64_t>(config.shuffle), static_cast<std::uint64_t>(config.drop_last),
        static_cast<std::uint64_t>(config.num_shards), static_cast<std::uint64_t>(config.shard_id),
        static_cast<std::uint64_t>(config.fetch_only)}) {
    f = mix_seed(f, v);
  }
  o.fingerprint = f;
  o.dataset = dataset->source().fingerprint();
  o.timeout_ns = static_cast<std::int64_t>(c.timeout_s * 1e9);
  o.join_timeout_ns = static_cast<std::int64_t>(c.join_timeout_s * 1e9);
  const Sampler sampler(dataset->size(), config.shuffle, config.seed, config.num_shards, config.shard_id);
  const std::size_t n = sampler.shard_size(), bs = static_cast<std::size_t>(config.batch_size);
  const std::size_t bpe = std::max<std::size_t>(1, config.drop_last ? n / bs : (n + bs - 1) / bs);
  EpochPlan plan{sampler, bs, bpe, config.max_epochs > 0 ? config.max_epochs * static_cast<long>(bpe) : -1};
  return std::make_shared<CoordinatedDataset>(std::move(dataset), std::move(o), config.allocator, std::move(plan));
}

}  // namespace mlbench::pipeline
