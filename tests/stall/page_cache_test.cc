#include "stall/page_cache.h"

#include <fstream>
#include <numeric>

#include <gtest/gtest.h>

#include "tests/support/run_command.h"

namespace mlbench::stall {
namespace {

namespace fs = std::filesystem;

class PageCacheTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_support::scratch_dir("page_cache");
    fs::create_directories(dir_ / "a");
    for (int i = 0; i < 4; ++i) {
      std::ofstream out(dir_ / "a" / ("f" + std::to_string(i) + ".bin"), std::ios::binary);
      std::string block(256 * 1024, static_cast<char>('a' + i));
      out << block;
    }
    std::ofstream(dir_ / ".hidden") << "x";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PageCacheTest, ListsRegularFilesSortedWithoutHidden) {
  const auto files = dataset_files(dir_);
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].filename(), "f0.bin");
  EXPECT_THROW(dataset_files(dir_ / "missing"), std::runtime_error);
}

TEST_F(PageCacheTest, EvictThenWarmChangesResidency) {
  const auto files = dataset_files(dir_);
  warm(files);
  const Residency hot = residency(files);
  EXPECT_EQ(hot.files, 4u);
  EXPECT_EQ(hot.bytes, 4u * 256 * 1024);
  EXPECT_DOUBLE_EQ(hot.fraction(), 1.0);
  evict(files);
  const Residency cold = residency(files);
  // tmpfs keeps pages in memory whatever fadvise says: that is a capability of the machine.
  if (cold.fraction() > 0.5) GTEST_SKIP() << "the temp directory's file system ignores POSIX_FADV_DONTNEED (tmpfs?)";
  EXPECT_LT(cold.fraction(), 0.05);
  warm(files);
  EXPECT_DOUBLE_EQ(residency(files).fraction(), 1.0);
}

TEST_F(PageCacheTest, PinnedFilesStayResidentUntilReleased) {
  const auto files = dataset_files(dir_);
  evict(files);
  if (residency(files).fraction() > 0.05) GTEST_SKIP() << "the temp directory ignores POSIX_FADV_DONTNEED (tmpfs?)";
  {
    const PinnedFiles pinned(files);  // reads in what is not resident
    if (!pinned.complete()) GTEST_SKIP() << "files cannot be locked in memory here: " << pinned.error();
    EXPECT_EQ(pinned.files(), 4u);
    EXPECT_EQ(pinned.bytes(), 4u * 256 * 1024);
    EXPECT_DOUBLE_EQ(residency(files).fraction(), 1.0);
    evict(files);  // cannot drop locked pages
    EXPECT_DOUBLE_EQ(residency(files).fraction(), 1.0);
  }
  evict(files);  // released: it can again
  EXPECT_LT(residency(files).fraction(), 0.05);
}

TEST_F(PageCacheTest, ReadRateCountsBytesAndFiles) {
  const auto files = dataset_files(dir_);
  std::vector<std::size_t> order(files.size());
  std::iota(order.begin(), order.end(), 0);
  const ReadRate r = read_rate(files, order);
  EXPECT_EQ(r.bytes, 4u * 256 * 1024);
  EXPECT_GT(r.mb_per_s, 0.0);
  EXPECT_NEAR(r.files_per_s * r.seconds, 4.0, 1e-6);
}

}  // namespace
}  // namespace mlbench::stall
