// Coordinated prep (pipeline/remedies/coordinated.h): several members in one process
// (threads) or in forked processes share one ring; every member gets every
// batch, each built once; faults: a killed member, a stalled one (injected
// clock), a stale segment from a killed run, a member with other settings.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "pipeline/remedies/coordinated.h"
#include "pipeline/data_error.h"
#include "pipeline/data_loader.h"
#include "pipeline/source.h"

namespace mlbench::pipeline {
namespace {

constexpr std::size_t kLabels = 4;
constexpr std::size_t kBytes = 64;

std::string unique_group(const std::string& what) {
  return fmt::format("test-{}-{}", what, ::getpid());
}

std::filesystem::path segment_path(const std::string& group) {
  return "/dev/shm" + coordinated_segment_name(group);
}

GroupOptions options(const std::string& group, int members) {
  GroupOptions o;
  o.group = group;
  o.members = members;
  o.slots = 3;
  o.data_bytes = kBytes;
  o.max_labels = kLabels;
  o.fingerprint = 42;
  o.timeout_ns = 60'000'000'000;  // no test waits for it on the real clock
  o.join_timeout_ns = 60'000'000'000;
  return o;
}

// A batch whose labels and pixels say which batch it is and who built it.
Batch make_batch(long sequence, int builder) {
  Batch b;
  b.size = static_cast<int>(kLabels);
  b.sequence = sequence;
  b.epoch = sequence / 5;
  b.index = sequence % 5;
  b.labels = {sequence, builder, sequence * 3, 7};
  b.data = default_host_allocator(kBytes);
  std::memset(b.data.data, static_cast<int>(sequence & 0x7f), kBytes);
  return b;
}

// What one member saw: batch -> builder, and whether the pixels were right.
struct Seen {
  std::map<long, long> builder;
  bool pixels_ok = true;
  long built_here = 0;
};

void take(CoordinationGroup& g, long sequence, Seen& seen) {
  Batch b = g.acquire(
      sequence,
      [&] {
        ++seen.built_here;
        return make_batch(sequence, g.member());
      },
      default_host_allocator);
  ASSERT_EQ(b.sequence, sequence);
  ASSERT_EQ(b.labels.size(), kLabels);
  EXPECT_EQ(b.labels[0], sequence);
  EXPECT_EQ(b.labels[2], sequence * 3);
  seen.builder[sequence] = b.labels[1];
  const auto* p = static_cast<const std::uint8_t*>(b.data.data);
  for (std::size_t i = 0; i < kBytes; ++i) seen.pixels_ok = seen.pixels_ok && p[i] == (sequence & 0x7f);
}

TEST(Coordinated, SegmentNamesAreChecked) {
  EXPECT_EQ(coordinated_segment_name("hp-search_1.a"), fmt::format("/mlbench-coord-{}-hp-search_1.a", ::geteuid()));
  EXPECT_THROW(coordinated_segment_name(""), std::invalid_argument);
  EXPECT_THROW(coordinated_segment_name("a/b"), std::invalid_argument);
  EXPECT_THROW(coordinated_segment_name(std::string(65, 'a')), std::invalid_argument);
}

TEST(Coordinated, ThreeMembersGetEveryBatchEachBuildsItsThird) {
  const std::string group = unique_group("three");
  constexpr long kBatches = 30;
  std::vector<Seen> seen(3);
  std::vector<GroupReport> reports(3);
  std::vector<std::thread> threads;
  for (int m = 0; m < 3; ++m) {
    threads.emplace_back([&, m] {
      CoordinationGroup g(options(group, 3));
      for (long s = 0; s < kBatches; ++s) take(g, s, seen[static_cast<std::size_t>(g.member())]);
      reports[static_cast<std::size_t>(g.member())] = g.report();
    });
  }
  for (auto& t : threads) t.join();
  for (int m = 0; m < 3; ++m) {
    const Seen& s = seen[static_cast<std::size_t>(m)];
    EXPECT_EQ(s.builder.size(), static_cast<std::size_t>(kBatches)) << "member " << m;
    EXPECT_TRUE(s.pixels_ok);
    EXPECT_EQ(s.built_here, kBatches / 3) << "member " << m;
    for (const auto& [seq, builder] : s.builder) EXPECT_EQ(builder, seq % 3) << "batch " << seq;
    const GroupReport& r = reports[static_cast<std::size_t>(m)];
    EXPECT_EQ(r.members, 3);
    EXPECT_EQ(r.joined, 3);
    EXPECT_EQ(r.prepped, kBatches / 3);
    EXPECT_EQ(r.consumed, kBatches);
    EXPECT_EQ(r.taken_over, 0);
    EXPECT_TRUE(r.dropped.empty());
  }
  EXPECT_FALSE(std::filesystem::exists(segment_path(group))) << "the last member removes the segment";
}

// A Dataset that fills each batch with its sequence and counts what it built.
class CountingDataset : public Dataset<Batch> {
 public:
  std::size_t size() const override { return 40; }
  Batch get_batch(const BatchRequest& r) override {
    ++built;
    Batch b = make_batch(r.sequence, 0);
    b.epoch = r.epoch;
    b.index = r.index;
    b.labels[0] = static_cast<std::int64_t>(r.item(0));
    return b;
  }
  std::atomic<long> built{0};
};

TEST(Coordinated, TwoLoadersWithWorkersShareTheirEpochs) {
  const std::string group = unique_group("loaders");
  LoaderOptions lo;
  lo.batch_size = 4;  // 10 batches an epoch
  lo.workers = 2;
  lo.max_epochs = 3;
  lo.seed = 5;
  std::vector<std::shared_ptr<CountingDataset>> inner(2);
  std::vector<std::vector<std::int64_t>> first_items(2);
  std::vector<nlohmann::json> report(2);
  std::vector<std::thread> threads;
  for (int m = 0; m < 2; ++m) {
    inner[static_cast<std::size_t>(m)] = std::make_shared<CountingDataset>();
    threads.emplace_back([&, m] {
      // With the epoch plan: a waiting worker builds its member's next batches ahead.
      EpochPlan plan{Sampler(40, true, lo.seed), lo.batch_size, 10, 30};
      auto ds = std::make_shared<CoordinatedDataset>(inner[static_cast<std::size_t>(m)], options(group, 2),
                                                     default_host_allocator, plan);
      DataLoader<Batch> loader(ds, lo);
      while (auto b = loader.next()) first_items[static_cast<std::size_t>(m)].push_back(b->labels[0]);
      loader.stop();
      report[static_cast<std::size_t>(m)] = ds->to_json();
      ds->leave();
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(first_items[0].size(), 30u);
  EXPECT_EQ(first_items[0], first_items[1]) << "one epoch order, every batch to both";
  EXPECT_EQ(inner[0]->built + inner[1]->built, 30) << "each batch built once";
  EXPECT_EQ(inner[0]->built, 15);
  for (const auto& j : report) {
    EXPECT_EQ(j["members"], 2);
    EXPECT_EQ(j["batches_consumed"], 30);
    EXPECT_EQ(j["batches_prepped"], 15);
    EXPECT_TRUE(j["members_dropped"].empty());
  }
  EXPECT_FALSE(std::filesystem::exists(segment_path(group)));
}

// Member 0 waits for batch 1 (member 1's, not started yet): meanwhile it builds
// its own batch 2 ahead (slot free), which both then take from the ring.
TEST(Coordinated, AWaitingMemberBuildsItsNextBatchAhead) {
  const std::string group = unique_group("ahead");
  std::unique_ptr<CoordinationGroup> a, b;
  std::thread join_b([&] { b = std::make_unique<CoordinationGroup>(options(group, 2)); });
  a = std::make_unique<CoordinationGroup>(options(group, 2));
  join_b.join();
  CoordinationGroup& first = a->member() == 0 ? *a : *b;
  CoordinationGroup& second = a->member() == 0 ? *b : *a;
  Seen s0, s1;
  take(first, 0, s0);
  std::atomic<long> ahead_built{-1};
  auto waiting = std::async(std::launch::async, [&] {
    Batch got = first.acquire(
        1, [&] { return make_batch(1, first.member()); }, default_host_allocator,
        [&](long s) {
          ahead_built = s;
          return make_batch(s, first.member());
        },
        -1);
    EXPECT_EQ(got.labels[1], second.member()) << "batch 1 is member 1's";
  });
  while (first.report().prepped < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ahead_built.load(), 2);
  for (long s = 0; s < 3; ++s) take(second, s, s1);
  waiting.get();
  take(first, 2, s0);  // from the ring: built here, ahead
  EXPECT_EQ(s0.built_here, 1) << "batch 2 came from the ring, not from a second build";
  EXPECT_EQ(s0.builder.at(2), first.member());
  EXPECT_EQ(s1.builder.at(2), first.member());
  EXPECT_EQ(s1.built_here, 1);
  EXPECT_TRUE(s0.pixels_ok && s1.pixels_ok);
}

TEST(Coordinated, AMemberWithOtherSettingsIsRefused) {
  const std::string group = unique_group("settings");
  std::promise<void> joined_first;
  auto first = std::async(std::launch::async, [&] {
    GroupOptions o = options(group, 2);
    o.join_timeout_ns = 200'000'000;  // starts alone when the other is refused
    CoordinationGroup g(o);
    return g.report().joined;
  });
  // Wait until the segment exists, then join with another fingerprint.
  while (!std::filesystem::exists(segment_path(group))) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  GroupOptions other = options(group, 2);
  other.fingerprint = 43;
  try {
    CoordinationGroup g(other);
    ADD_FAILURE() << "a member with another fingerprint joined";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("other settings"), std::string::npos) << e.what();
  }
  EXPECT_EQ(first.get(), 1);
  EXPECT_FALSE(std::filesystem::exists(segment_path(group)));
}

// The stalled member stops beating and taking batches; the injected clock
// moves past the timeout; the other drops it, builds its share, and goes on.
TEST(Coordinated, AStalledMemberIsDroppedAndItsShareTakenOver) {
  const std::string group = unique_group("stall");
  std::atomic<std::int64_t> now{1'000'000'000};
  auto opts = [&] {
    GroupOptions o = options(group, 2);
    o.timeout_ns = 5'000'000'000;
    o.clock = [&] { return now.load(); };
    o.heartbeat_thread = false;
    return o;
  };
  std::unique_ptr<CoordinationGroup> a, b;
  std::thread join_b([&] { b = std::make_unique<CoordinationGroup>(opts()); });
  a = std::make_unique<CoordinationGroup>(opts());
  join_b.join();
  CoordinationGroup& first = a->member() == 0 ? *a : *b;
  CoordinationGroup& second = a->member() == 0 ? *b : *a;
  Seen s0, s1;
  // Batches 0 and 1 go to both; then `second` stalls.
  for (long s = 0; s < 2; ++s) {
    std::thread t([&] { take(second, s, s1); });
    take(first, s, s0);
    t.join();
  }
  auto rest = std::async(std::launch::async, [&] {
    for (long s = 2; s < 12; ++s) take(first, s, s0);
  });
  // Only the clock moves: `first` keeps beating (it is alive), `second` does not.
  while (rest.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready) {
    now += 1'000'000'000;
    first.beat();
  }
  rest.get();
  EXPECT_EQ(s0.builder.size(), 12u);
  EXPECT_TRUE(s0.pixels_ok);
  const GroupReport r = first.report();
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].member, second.member());
  EXPECT_NE(r.dropped[0].reason.find("stalled"), std::string::npos) << r.dropped[0].reason;
  EXPECT_EQ(r.taken_over, 5) << "batches 3, 5, 7, 9, 11 were the stalled member's";
  EXPECT_EQ(r.consumed, 12);
  // The stalled member, back, learns it was dropped.
  try {
    take(second, 2, s1);
    ADD_FAILURE() << "a dropped member got a batch";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("dropped"), std::string::npos) << e.what();
  }
  a.reset();
  b.reset();
  EXPECT_FALSE(std::filesystem::exists(segment_path(group)));
}

// A forked member takes batches until the parent kills it (SIGKILL, maybe
// inside the shared mutex); the parent drops it by its pid and finishes alone.
TEST(Coordinated, AKilledMemberIsDroppedAndTheRunGoesOn) {
  const std::string group = unique_group("kill");
  constexpr long kBatches = 40;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      CoordinationGroup g(options(group, 2));
      Seen seen;
      for (long s = 0; s < kBatches; ++s) take(g, s, seen);
      std::this_thread::sleep_for(std::chrono::seconds(60));  // never leaves by itself
    } catch (...) {
    }
    ::_exit(0);
  }
  Seen seen;
  GroupReport r;
  {
    CoordinationGroup g(options(group, 2));
    for (long s = 0; s < kBatches; ++s) {
      if (s == 5) {
        ::kill(child, SIGKILL);
        ::waitpid(child, nullptr, 0);
      }
      take(g, s, seen);
    }
    r = g.report();
  }
  EXPECT_EQ(seen.builder.size(), static_cast<std::size_t>(kBatches));
  EXPECT_TRUE(seen.pixels_ok);
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].pid, child);
  EXPECT_NE(r.dropped[0].reason.find("exited"), std::string::npos) << r.dropped[0].reason;
  EXPECT_GT(r.taken_over, 0);
  EXPECT_EQ(r.consumed, kBatches);
  EXPECT_FALSE(std::filesystem::exists(segment_path(group))) << "the last live member removes the segment";
}

// A run killed with its segment in place: the next run finds every member
// dead, removes the segment and starts afresh instead of refusing to join.
TEST(Coordinated, AStaleSegmentOfAKilledRunIsRemovedAtStart) {
  const std::string group = unique_group("stale");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    GroupOptions o = options(group, 2);
    o.join_timeout_ns = 0;  // starts alone
    CoordinationGroup g(o);
    Seen seen;
    take(g, 0, seen);
    ::raise(SIGKILL);  // dies without leaving
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_TRUE(std::filesystem::exists(segment_path(group))) << "the killed run left its segment";
  {
    GroupOptions o = options(group, 1);
    CoordinationGroup g(o);
    EXPECT_TRUE(g.report().stale_segment_removed);
    Seen seen;
    for (long s = 0; s < 5; ++s) take(g, s, seen);
    EXPECT_EQ(seen.builder.size(), 5u);
  }
  EXPECT_FALSE(std::filesystem::exists(segment_path(group)));
}

TEST(Coordinated, AGroupAlreadyRunningRefusesANewMember) {
  const std::string group = unique_group("running");
  GroupOptions o = options(group, 2);
  o.join_timeout_ns = 0;  // starts alone at once
  CoordinationGroup g(o);
  try {
    CoordinationGroup late(options(group, 2));
    ADD_FAILURE() << "joined a running group";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("already running"), std::string::npos) << e.what();
  }
}

// Member 0 waits for batch 1, which the idle (alive, beating) member 1 owns:
// stop() ends the wait with an error instead of a hang.
TEST(Coordinated, StopWakesAWaiter) {
  const std::string group = unique_group("stop");
  std::unique_ptr<CoordinationGroup> a, b;
  std::thread join_b([&] { b = std::make_unique<CoordinationGroup>(options(group, 2)); });
  a = std::make_unique<CoordinationGroup>(options(group, 2));
  join_b.join();
  CoordinationGroup& first = a->member() == 0 ? *a : *b;
  auto waiter = std::async(std::launch::async, [&] {
    Seen seen;
    take(first, 0, seen);
    take(first, 1, seen);
  });
  EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  first.stop();
  EXPECT_THROW(waiter.get(), std::runtime_error);
}

constexpr uid_t kNobody = 65534;

// Another user's group under the same --group: once /dev/shm/mlbench-coord-NAME was shared by
// every user, and a root process joined the group user nobody created and trained on its batches.
TEST(Coordinated, AnotherUsersGroupOfTheSameNameIsNeverJoined) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run a member as user nobody";
  const std::string group = unique_group("user");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(3);
    GroupOptions o = options(group, 2);
    o.join_timeout_ns = 30'000'000'000;  // waits for a second member: the other user must not be it
    o.heartbeat_thread = false;
    std::thread waiter([&] {
      try {
        CoordinationGroup g(o);
        ::_exit(g.report().joined == 2 ? 4 : 0);
      } catch (...) {
        ::_exit(5);
      }
    });
    // Up once its segment exists.
    const std::string path = "/dev/shm" + coordinated_segment_name(group);
    while (!std::filesystem::exists(path)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    (void)!::write(ready[1], "x", 1);
    waiter.join();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "nobody's member did not start";
  ::close(ready[0]);
  {
    GroupOptions o = options(group, 2);
    o.join_timeout_ns = 300'000'000;  // alone after 0.3 s: nobody's member is not a member of this group
    CoordinationGroup g(o);
    EXPECT_EQ(g.report().joined, 1) << "joined another user's group";
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  // Its segment (nobody's name) is left by the kill: remove it.
  ::shm_unlink(fmt::format("/mlbench-coord-{}-{}", kNobody, group).c_str());
}

// A segment another user placed under this user's name (before this user's group started) is
// refused, not joined nor resized.
TEST(Coordinated, ASegmentOfAnotherUserUnderThisUsersNameIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a file to user nobody";
  const std::string group = unique_group("planted");
  const auto path = segment_path(group);
  {
    std::ofstream(path) << "";
    ASSERT_EQ(::chown(path.c_str(), kNobody, kNobody), 0);
  }
  try {
    CoordinationGroup g(options(group, 1));
    ADD_FAILURE() << "used a segment that belongs to nobody";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to user nobody"), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::filesystem::file_size(path), 0u) << "the planted file was written";
  std::filesystem::remove(path);
}

TEST(Coordinated, ASegmentIsCreatedPrivateToItsUser) {
  const std::string group = unique_group("mode");
  GroupOptions o = options(group, 1);
  CoordinationGroup g(o);
  struct stat st {};
  ASSERT_EQ(::stat(segment_path(group).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
}

// Two jobs over different datasets of the same size once joined one group and each trained
// on about half of the other's batches.
TEST(Coordinated, AMemberOverAnotherDatasetIsRefused) {
  const std::string group = unique_group("dataset");
  GroupOptions o = options(group, 2);
  o.join_timeout_ns = 200'000'000;
  o.dataset = 1;
  auto first = std::async(std::launch::async, [&] {
    CoordinationGroup g(o);
    return g.report().joined;
  });
  while (!std::filesystem::exists(segment_path(group))) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  GroupOptions other = options(group, 2);
  other.dataset = 2;
  try {
    CoordinationGroup g(other);
    ADD_FAILURE() << "a member over another dataset joined";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("another dataset"), std::string::npos) << e.what();
  }
  EXPECT_EQ(first.get(), 1);
}

TEST(Coordinated, TheDatasetsFingerprintIsItsFilesNotTheirCount) {
  const auto root = std::filesystem::temp_directory_path() / fmt::format("mlbench_fp_{}", ::getpid());
  auto make = [&](const std::string& name, const std::string& file, const std::string& bytes) {
    const auto dir = root / name / "c0";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / file) << bytes;
    std::ofstream(dir / "b.jpg") << "bbbb";
    return root / name;
  };
  const auto a = make("a", "a.jpg", "aaaa");
  const auto copy = make("copy", "a.jpg", "aaaa");        // the same files elsewhere
  const auto other = make("other", "x.jpg", "aaaa");      // as many files, other names
  const auto longer = make("longer", "a.jpg", "aaaaaa");  // a file of another size
  const auto fa = ImageFolderReader(a).fingerprint();
  EXPECT_EQ(fa, ImageFolderReader(copy).fingerprint());
  EXPECT_NE(fa, ImageFolderReader(other).fingerprint());
  EXPECT_NE(fa, ImageFolderReader(longer).fingerprint());
  std::filesystem::remove_all(root);
}

// A run whose members were all killed (SIGKILL) left its whole ring in /dev/shm until a run
// of the same group came; any group's start now removes its user's stale segments.
TEST(Coordinated, StaleSegmentsOfOtherGroupsAreRemovedWhenAnyGroupStarts) {
  const std::string dead = unique_group("dead");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    GroupOptions o = options(dead, 2);
    o.join_timeout_ns = 0;
    CoordinationGroup g(o);
    ::raise(SIGKILL);
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_TRUE(std::filesystem::exists(segment_path(dead)));
  {
    CoordinationGroup g(options(unique_group("alive"), 1));
    EXPECT_GE(g.report().stale_segments_removed, 1);
  }
  EXPECT_FALSE(std::filesystem::exists(segment_path(dead)));
}

// Damage to a running group's segment by another process (docs/pipeline.md, "Coordinated prep").
// A member in a forked child and one here take batches 0..5; then `damage` (in a third process)
// harms the segment. Each member's next batch must fail with a DataError that names the segment
// and says what happened, and leaving must not throw. (Before: a truncated segment killed every
// member with SIGBUS; an overwritten header ended in `terminate called` when the member left.)
void damaged_group_fails_each_member(const std::string& what, const std::function<void(const std::string&)>& damage,
                                     const std::string& expected) {
  const std::string group = unique_group(what);
  const std::string path = segment_path(group).string();
  // The message each member gets: "" when none came (the test then fails).
  const auto run_member = [&](bool child) {
    std::string message;
    try {
      CoordinationGroup g(options(group, 2));
      Seen seen;
      for (long s = 0; s < 6; ++s) take(g, s, seen);
      if (!child) {
        const pid_t harm = ::fork();
        if (harm == 0) {
          damage(path);
          ::_exit(0);
        }
        ::waitpid(harm, nullptr, 0);
      }
      for (long s = 6; s < 100'000; ++s) take(g, s, seen);
    } catch (const DataError& e) {
      message = e.what();
    }
    return message;
  };
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string m = run_member(true);
    ::_exit(m.find(path) != std::string::npos && m.find(expected) != std::string::npos ? 0 : 3);
  }
  const std::string m = run_member(false);
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find(expected), std::string::npos) << m;
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the other member: "
      << (WIFSIGNALED(status) ? fmt::format("killed by signal {}", WTERMSIG(status))
                              : fmt::format("exit {}", WEXITSTATUS(status)));
  std::filesystem::remove(path);
}

TEST(Coordinated, ASegmentTruncatedByAnotherProcessFailsEachMemberNamingIt) {
  for (const bool to_zero : {true, false}) {
    SCOPED_TRACE(to_zero ? "truncated to 0 bytes" : "truncated to half its size");
    damaged_group_fails_each_member(
        to_zero ? "trunc0" : "trunchalf",
        [&](const std::string& path) {
          const auto size = std::filesystem::file_size(path);
          std::filesystem::resize_file(path, to_zero ? 0 : size / 2);
        },
        "another process truncated its shared-memory segment");
  }
}

TEST(Coordinated, ASegmentWhoseHeaderWasOverwrittenFailsEachMemberAndLeavesCleanly) {
  damaged_group_fails_each_member(
      "overwritten",
      [](const std::string& path) {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        const std::string junk(64, 'X');
        f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
      },
      "another process overwrote the header");
}

// A member whose slot (not its header) was overwritten gets a DataError, not a batch of
// garbage sizes (which read past the mapping).
TEST(Coordinated, AnOverwrittenSlotIsRefusedNotCopied) {
  const std::string group = unique_group("slot");
  GroupOptions o = options(group, 2);
  std::unique_ptr<CoordinationGroup> a, b;
  std::thread join_b([&] { b = std::make_unique<CoordinationGroup>(o); });
  a = std::make_unique<CoordinationGroup>(o);
  join_b.join();
  CoordinationGroup& first = a->member() == 0 ? *a : *b;
  CoordinationGroup& second = a->member() == 0 ? *b : *a;
  Seen seen;
  take(first, 0, seen);  // built by member 0, waiting in slot 0 for member 1
  {
    // Slot 0's BatchHeader: the first bytes after the header and the slot table; found by its
    // labels' marker (make_batch: labels {0, 0, 0, 7}).
    const int fd = ::open(segment_path(group).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const auto size = static_cast<std::size_t>(std::filesystem::file_size(segment_path(group)));
    auto* m = static_cast<std::uint8_t*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ASSERT_NE(m, MAP_FAILED);
    bool found = false;
    for (std::size_t at = 0; at + 64 + 32 <= size && !found; at += 64) {
      std::int64_t labels[4];
      std::memcpy(labels, m + at + 64, sizeof labels);
      if (labels[0] == 0 && labels[1] == 0 && labels[2] == 0 && labels[3] == 7) {
        std::int32_t huge = 1 << 30;
        std::memcpy(m + at, &huge, sizeof huge);  // BatchHeader::size
        found = true;
      }
    }
    ::munmap(m, size);
    ::close(fd);
    ASSERT_TRUE(found);
  }
  try {
    take(second, 0, seen);
    ADD_FAILURE() << "took a batch from an overwritten slot";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("overwrote slot 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(segment_path(group).string()), std::string::npos) << e.what();
  }
  a.reset();
  b.reset();
  std::filesystem::remove(segment_path(group));  // a damaged segment is left for the next start to remove
}

}  // namespace
}  // namespace mlbench::pipeline
