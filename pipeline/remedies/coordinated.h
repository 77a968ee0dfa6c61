// Coordinated prep (CoorDL, docs/pipeline.md "Coordinated prep"): K training
// processes on one machine that read the same dataset in the same epoch order
// (a hyper-parameter search) share the work of fetching and preparing it. Batch
// `s` of the run is built by one member only (member s % K while it lives) and
// published into a POSIX shared-memory ring of batch slots; every member takes
// every batch from the ring, and a slot is reused once every live member has
// taken its batch. A member that exits, is killed or stops heartbeating for
// longer than a timeout is dropped and its share is built by the others.
//
// CoordinationGroup is the shared segment and its protocol (no loader in it,
// so tests drive several members in one process or in forked ones);
// CoordinatedDataset is the Dataset the loader runs over: it asks the group
// for each batch and builds, through the wrapped ImageDataset, only its share.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/batch.h"
#include "pipeline/buffer_pool.h"
#include "pipeline/dataset.h"
#include "pipeline/sampler.h"

namespace mlbench::pipeline {

// --coordinated K --group NAME [--coordinated-timeout S] [--coordinated-join-timeout S].
struct CoordinatedConfig {
  int members = 0;               // K; 0: not coordinated
  std::string group;             // names the shared-memory segment: /dev/shm/mlbench-coord-<group>
  double timeout_s = 10.0;       // a member whose heartbeat is older than this is dropped
  double join_timeout_s = 60.0;  // how long the first members wait for the others to start
  int slots = 0;                 // batch slots in the ring (0: 2 x prefetch + K)
  bool enabled() const { return members > 0; }
};

// Set in a process whose loaders must not join a group although configured to:
// a benchmark's memory probe (benchmarks/support/torch_runtime.cc) runs one
// step of its own, at another batch size, in a forked child.
inline constexpr const char* kNoCoordinationEnv = "MLBENCH_NO_COORDINATION";

// Largest K: a slot's pending members are one 64-bit mask.
inline constexpr int kMaxCoordinatedMembers = 64;

// Nanoseconds on a clock every process on the machine shares (CLOCK_MONOTONIC);
// tests inject their own to make a member's heartbeat go stale without waiting.
using GroupClock = std::function<std::int64_t()>;
std::int64_t monotonic_ns();

// The shared segment's name for a group ("/mlbench-coord-<euid>-<group>": one name
// space per user; a segment is created 0600 with O_EXCL and joined only when this
// user owns it); throws
// std::invalid_argument for a group name that is empty, longer than 64
// characters or has characters other than letters, digits, '.', '_', '-'.
std::string coordinated_segment_name(const std::string& group);

struct GroupOptions {
  std::string group;
  int members = 2;
  int slots = 4;
  std::size_t data_bytes = 0;  // largest batch's pixel bytes
  std::size_t max_labels = 0;  // largest batch's label count
  // Settings every member must share (seed, batch shape, dataset size, ...):
  // a member whose fingerprint differs is refused.
  std::uint64_t fingerprint = 0;
  // The dataset every member must read (ItemSource::fingerprint: its items' names,
  // sizes and labels): a member over another dataset is refused.
  std::uint64_t dataset = 0;
  std::int64_t timeout_ns = 10'000'000'000;
  std::int64_t join_timeout_ns = 60'000'000'000;
  GroupClock clock = monotonic_ns;
  // A thread that beats every timeout/5; tests that inject a clock turn it off
  // and call beat() themselves.
  bool heartbeat_thread = true;
};

// What a member saw of the group (the report's pipeline.coordinated block).
struct GroupReport {
  std::string group;
  int members = 0;  // K
  int member = -1;  // this process's place in the group
  int joined = 0;   // members that joined before the start (K unless some never came)
  int slots = 0;
  std::size_t slot_bytes = 0;
  long prepped = 0;        // batches built here and published
  long taken_over = 0;     // of those, batches another member was to build
  long consumed = 0;       // batches taken (built here or copied from the ring)
  double wait_s = 0;       // waiting for other members' batches
  double slot_wait_s = 0;  // waiting for a free slot (slower members still using it)
  struct Dropped {
    int member = 0;
    long pid = 0;
    std::string reason;
  };
  std::vector<Dropped> dropped;        // members dropped from the group (by any member)
  bool stale_segment_removed = false;  // a killed run's segment was found and removed at start
  int stale_segments_removed = 0;      // segments of this user's other groups whose members were all gone
};
nlohmann::json to_json(const GroupReport& r);

class CoordinationGroup {
 public:
  // Opens the group's segment, creating it, or removing a stale one first (one
  // whose members are all dead); joins it; waits until K members joined or the
  // join timeout passed (the missing ones are then out of the group). Throws
  // DataError for a group already running without this process, a member with
  // different settings, or a segment that cannot be made.
  explicit CoordinationGroup(GroupOptions options);
  // Leaves the group; the last member to leave removes the segment.
  ~CoordinationGroup();
  CoordinationGroup(const CoordinationGroup&) = delete;
  CoordinationGroup& operator=(const CoordinationGroup&) = delete;

  // Batch `sequence` of the run: built here by `build` when this member is to
  // build it (its share, or a dropped member's), else copied from the ring
  // into a buffer from `allocate`. Blocks while another member builds it or
  // while its slot still holds an older batch. Throws DataError when this
  // member has been dropped, std::runtime_error once stop() was called.
  // `build_ahead` (optional): builds batch s (s > sequence, before `end` when
  // end >= 0): while waiting, this member builds its own next batches whose
  // slots are free instead of idling, so that a member with one worker does
  // not take turns with the others.
  Batch acquire(long sequence, const std::function<Batch()>& build,
                const std::function<HostBuffer(std::size_t)>& allocate,
                const std::function<Batch(long)>& build_ahead = nullptr, long end = -1);

  // Records that this member is alive (the heartbeat thread calls it).
  void beat();
  // Drops every member that exited or whose heartbeat is older than the
  // timeout; returns how many it dropped. Waiters call it as they poll.
  int drop_dead_members();
  // Wakes acquire()'s waiters: they throw. For the loader's stop().
  void stop();
  // Leaves the group now (the destructor does it otherwise).
  void leave();

  // Why the segment can no longer be trusted, "" while it is intact: another process truncated
  // it (a SIGBUS on the mapping, caught, or fstat finds it shorter than mapped) or overwrote its
  // header (the magic, the layout or the group's settings are no longer this group's). Every
  // lock of the segment checks it; acquire() then throws DataError naming the segment, and
  // leave() leaves such a segment untouched.
  std::string damage() const;

  int member() const { return member_; }
  int members() const { return options_.members; }
  const std::string& segment() const { return name_; }
  GroupReport report() const;

  struct Shared;  // the segment's header (coordinated.cc)

 private:
  class Lock;
  void open_or_create();
  // Removes this user's segments of other groups whose members are all gone (a run killed
  // with SIGKILL leaves its ring in /dev/shm); a segment being set up (flocked) is left.
  void remove_stale_groups();
  // Whether the mapped segment `s` of `size` bytes is a killed run's: not (yet) a segment of this
  // layout, or no joined member whose process is alive. Takes the segment's lock.
  static bool stale(Shared* s, std::size_t size);
  void wait_for_members();
  void leave_segment();  // leave(): this member's slots and state, under the lock; may throw
  void check_not_dropped() const;
  void check_intact() const;                   // throws DataError naming the segment when damage() is not ""
  void write_slot(int index, const Batch& b);  // no lock: the slot is this member's (Building)
  bool build_one_ahead(Lock& lock, long sequence, long end, const std::function<Batch(long)>& build_ahead);
  int owner_of(long sequence) const;            // under the lock
  bool live(int m) const;                       // under the lock
  void drop(int m, const std::string& reason);  // under the lock
  void free_if_done(int slot);                  // under the lock
  void wait_a_while();                          // under the lock: a timed wait on the shared condition
  void heartbeat_loop();

  GroupOptions options_;
  std::string name_;
  int fd_ = -1;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  int guard_ = -1;  // the mapping's entry in the SIGBUS guard (coordinated.cc)
  mutable std::atomic<bool> damaged_{false};
  Shared* shared_ = nullptr;
  std::uint8_t* slot_data_ = nullptr;
  std::size_t slot_stride_ = 0;
  int member_ = -1;
  bool left_ = false;
  bool stale_removed_ = false;
  int stale_groups_removed_ = 0;
  std::atomic<bool> stopping_{false};
  std::int64_t last_check_ns_ = 0;
  // This process's counters (the shared ones are per member too; these need no lock).
  std::atomic<long> prepped_{0}, taken_over_{0}, consumed_{0};
  std::atomic<std::int64_t> wait_ns_{0}, slot_wait_ns_{0};
  std::mutex beat_mu_;
  std::condition_variable beat_cv_;
  bool beat_stop_ = false;
  std::thread beat_thread_;
};

// The Dataset the loader runs over under --coordinated: each batch through the
// group, built by `inner` only when it is this member's to build.
// The loader's epochs, so that a member can make the requests of batches it
// builds ahead (as DataLoader does: batch s is epoch s / batches_per_epoch).
struct EpochPlan {
  Sampler sampler;
  std::size_t batch_size = 1;
  std::size_t batches_per_epoch = 1;
  long end = -1;  // first sequence past max_epochs (-1: endless)
};

class CoordinatedDataset : public Dataset<Batch> {
 public:
  // `plan`: without it, a member waits idle for the others' batches.
  CoordinatedDataset(std::shared_ptr<Dataset<Batch>> inner, GroupOptions options, HostAllocator allocator,
                     std::optional<EpochPlan> plan = std::nullopt);
  ~CoordinatedDataset() override;

  std::size_t size() const override { return inner_->size(); }
  // Joins the group (blocks until the K members are there or the join timeout).
  void prepare(const BuildSetup& setup) override;
  Batch get_batch(const BatchRequest& request) override;
  void stop() override;

  // Leaves the group: call it when the loader is done, so the others take over at once.
  void leave();
  // The report's pipeline.coordinated block (null before the group was joined).
  nlohmann::json to_json() const;

 private:
  BatchRequest request(long sequence, int worker);  // for a batch built ahead

  std::shared_ptr<Dataset<Batch>> inner_;
  GroupOptions options_;
  std::optional<EpochPlan> plan_;
  std::mutex orders_mu_;
  std::map<long, std::shared_ptr<const std::vector<std::size_t>>> orders_;
  BufferPool pool_;
  std::unique_ptr<CoordinationGroup> group_;
  std::unique_ptr<GroupReport> final_;  // kept after leave()
};

class ImageDataset;
struct LoaderConfig;
// The image loader's CoordinatedDataset over `dataset` for `config.coordinated`:
// slots sized from the batch shape; a fingerprint of the settings every member
// must share (seed, batch size, image size, output type, shuffle, dataset size).
std::shared_ptr<CoordinatedDataset> coordinated_dataset(std::shared_ptr<ImageDataset> dataset,
                                                        const LoaderConfig& config);

}  // namespace mlbench::pipeline
