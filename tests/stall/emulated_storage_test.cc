// stallsim's emulated storage: with --drop-after-read and a set bandwidth, a
// read that misses the page cache must not go to the real device, whose
// latency under a neighbour's I/O would otherwise slow the emulated one below
// its injected rate (a prep-bound ground-truth config measured 20% fetch
// stall while dd wrote to the same disk). The real device's reads are those
// /proc/self/io counts as read_bytes.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "benchmarks/stallsim/emulated_storage.h"
#include "pipeline/options.h"
#include "stall/page_cache.h"
#include "tests/support/temp_dir.h"

namespace mlbench::stallsim {
namespace {

namespace fs = std::filesystem;

constexpr int kFiles = 8;
constexpr int kFileBytes = 65536;

// Bytes this process has had read from a block device so far (-1: unknown).
long long device_read_bytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  long long value = 0;
  while (in >> key >> value) {
    if (key == "read_bytes:") return value;
  }
  return -1;
}

// kFiles files of kFileBytes in dir/c0, none of them in the page cache; empty
// when the directory ignores POSIX_FADV_DONTNEED (tmpfs).
std::vector<fs::path> cold_files(const fs::path& dir) {
  fs::create_directories(dir / "c0");
  for (int i = 0; i < kFiles; ++i) {
    std::ofstream out(dir / "c0" / fmt::format("f{}.bin", i), std::ios::binary);
    out << std::string(kFileBytes, static_cast<char>('a' + i));
  }
  const auto files = stall::dataset_files(dir);
  stall::warm(files);
  stall::evict(files);
  if (stall::residency(files).fraction() > 0.05) return {};
  return files;
}

constexpr const char* kNoColdReads = "the temp directory ignores POSIX_FADV_DONTNEED (tmpfs?): no cold reads possible";

TEST(EmulatedStorage, ColdReadsThatAreDroppedNeverTouchTheRealDevice) {
  testing_support::TempDir dir("emulated_storage");
  const auto files = cold_files(dir.path());
  if (files.empty()) GTEST_SKIP() << kNoColdReads;
  if (device_read_bytes() < 0) GTEST_SKIP() << "no /proc/self/io read_bytes: cannot see the real device's reads";

  pipeline::PipelineOptions options;
  options.drop_after_read = true;
  const EmulatedStorage storage(pipeline::open_image_folder(dir.path().string(), "", options), 1000.0);
  const long long before = device_read_bytes();
  pipeline::Bytes bytes;
  for (std::size_t i = 0; i < storage.size(); ++i) {
    storage.fetch(i, bytes);
    EXPECT_EQ(bytes.size(), static_cast<std::size_t>(kFileBytes)) << "item " << i;
  }
  EXPECT_EQ(device_read_bytes() - before, 0) << "cold reads went to the real device";
  EXPECT_EQ(storage.device_reads(), kFiles);
  EXPECT_EQ(storage.cached_reads(), 0);
  EXPECT_LT(stall::residency(files).fraction(), 0.05) << "a dropped read left pages in the page cache";
}

TEST(EmulatedStorage, ColdReadsThatAreKeptFillThePageCacheWithTheRealBytes) {
  testing_support::TempDir dir("emulated_storage");
  const auto files = cold_files(dir.path());
  if (files.empty()) GTEST_SKIP() << kNoColdReads;
  const EmulatedStorage storage(pipeline::open_image_folder(dir.path().string(), "", {}), 1000.0);
  pipeline::Bytes bytes;
  for (std::size_t i = 0; i < storage.size(); ++i) {
    storage.fetch(i, bytes);
    ASSERT_EQ(bytes.size(), static_cast<std::size_t>(kFileBytes));
    EXPECT_EQ(bytes.front(), bytes.back());
    EXPECT_GE(bytes.front(), 'a');
  }
  EXPECT_EQ(storage.device_reads(), kFiles);
  EXPECT_GT(stall::residency(files).fraction(), 0.95) << "a kept cold read must leave the file in the page cache";
}

// --hold-page-cache: the page cache stays as the run found it. The emulated storage ignored the
// flag, so mlbench-stall's page-cache check at 50% resident ran with the whole dataset resident
// after one epoch, far faster than predicted, and the self-check withheld a recommendation the
// model had right.
TEST(EmulatedStorage, AHeldPageCacheKeepsWhatWasNotResidentOutOfIt) {
  testing_support::TempDir dir("emulated_storage");
  const auto files = cold_files(dir.path());
  if (files.empty()) GTEST_SKIP() << kNoColdReads;
  const std::vector<fs::path> half(files.begin(), files.begin() + kFiles / 2);
  stall::warm(half);
  pipeline::PipelineOptions options;
  options.hold_page_cache = true;
  const EmulatedStorage storage(pipeline::open_image_folder(dir.path().string(), "", options), 1000.0);
  pipeline::Bytes bytes;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (std::size_t i = 0; i < storage.size(); ++i) storage.fetch(i, bytes);
  }
  EXPECT_NEAR(stall::residency(files).fraction(), 0.5, 0.05);
  EXPECT_EQ(storage.device_reads(), kFiles);  // the cold half, both epochs
  EXPECT_EQ(storage.cached_reads(), kFiles);  // the warm half, both epochs
}

}  // namespace
}  // namespace mlbench::stallsim
