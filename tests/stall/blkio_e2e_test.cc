// mlbench-stall on real files behind a real throttled disk (docs/stall.md): the test
// makes a cgroup v1 blkio group, throttles reads from the disk that holds its
// scratch folder to 0.5 MB/s, runs the analyzer on the loader inside it and
// removes the group. The loader is then fetch-bound; the split, the storage
// rate and the what-if at half the dataset cached must match the throttle.
// Skips, saying why, without root, a cgroup v1 blkio controller or a block
// device under the scratch folder (tmpfs).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/jpeg_folder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;

constexpr double kThrottleBytesPerS = 500e3;
const fs::path kBlkio = "/sys/fs/cgroup/blkio";

// "major:minor" of the whole disk under `path` ("" when it is not on a block device).
std::string disk_of(const fs::path& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || major(st.st_dev) == 0) return "";
  std::string dev = fmt::format("{}:{}", major(st.st_dev), minor(st.st_dev));
  const fs::path sys = fs::path("/sys/dev/block") / dev;
  if (!fs::exists(sys)) return "";
  if (fs::exists(sys / "partition")) {  // a partition's throttle goes on its disk
    std::ifstream in(fs::canonical(sys).parent_path() / "dev");
    std::getline(in, dev);
  }
  return dev;
}

// The programs the test runs and every shared library they load, held in memory
// (mmap + mlock) while the disk is throttled: the throttle counts every read from
// the disk, and a VM that gives its page cache back (little of it cached right
// after a build) would leave the loader paging in LibTorch at 0.5 MB/s, minutes
// before its first batch, and the test timing out.
class PinnedFiles {
 public:
  explicit PinnedFiles(const std::vector<fs::path>& programs) {
    std::vector<fs::path> files = programs;
    for (const fs::path& p : programs) {
      const auto r = mlbench::testing_support::run_command("ldd " + p.string());
      std::istringstream lines(r.output);
      for (std::string line; std::getline(lines, line);) {
        const auto arrow = line.find("=> /");
        if (arrow == std::string::npos) continue;
        std::string lib = line.substr(arrow + 3);
        lib = lib.substr(0, lib.find(' '));
        files.emplace_back(lib);
      }
    }
    for (const fs::path& f : files) pin(f);
  }
  ~PinnedFiles() {
    for (const auto& [addr, len] : maps_) munmap(addr, len);
  }
  PinnedFiles(const PinnedFiles&) = delete;
  PinnedFiles& operator=(const PinnedFiles&) = delete;
  std::size_t count() const { return maps_.size(); }
  const std::string& errors() const { return errors_; }

 private:
  void pin(const fs::path& f) {
    const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
      if (fd >= 0) close(fd);
      errors_ += f.string() + " (cannot open); ";
      return;
    }
    const auto len = static_cast<std::size_t>(st.st_size);
    void* addr = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (addr == MAP_FAILED) {
      errors_ += f.string() + " (mmap failed); ";
      return;
    }
    if (mlock(addr, len) != 0) errors_ += f.string() + " (mlock failed); ";  // read in, not held
    maps_.emplace_back(addr, len);
  }
  std::vector<std::pair<void*, std::size_t>> maps_;
  std::string errors_;
};

class BlkioStall : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "not root: cannot make a blkio cgroup";
    if (!fs::exists(kBlkio / "blkio.throttle.read_bps_device")) {
      GTEST_SKIP() << "no cgroup v1 blkio controller at " << kBlkio << ": no throttled disk here";
    }
    dir_ = mlbench::testing_support::scratch_dir("stall_blkio");
    disk_ = disk_of(dir_);
    if (disk_.empty()) GTEST_SKIP() << dir_ << " is not on a block device (tmpfs?): nothing to throttle";
    mlbench::testing_support::make_jpeg_folder(dir_ / "data", 2, 100);
    group_ = kBlkio / fmt::format("mlbench-test-blkio-{}", getpid());
    fs::create_directory(group_);
    std::ofstream(group_ / "blkio.throttle.read_bps_device")
        << fmt::format("{} {}\n", disk_, static_cast<long>(kThrottleBytesPerS));
  }
  void TearDown() override {
    if (!group_.empty() && fs::exists(group_)) {
      // Anything left (nothing, normally) goes back to the root group first.
      std::ifstream procs(group_ / "cgroup.procs");
      for (std::string pid; std::getline(procs, pid);) std::ofstream(kBlkio / "cgroup.procs") << pid << "\n";
      std::error_code ec;
      fs::remove(group_, ec);
      EXPECT_FALSE(fs::exists(group_)) << "could not remove " << group_ << ": " << ec.message();
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_, group_;
  std::string disk_;
};

TEST_F(BlkioStall, AThrottledDiskIsFoundFetchBoundAndTheWhatIfHolds) {
  const fs::path out = dir_ / "out";
  const std::string cmd = fmt::format(
      "sh -c 'echo $$ > {}/cgroup.procs && exec {} --bench loader --bench-dir {} --data {} --cpus 2 "
      "--cache-fracs 0.5 --iterations 60 --out {} -- --batch-size 16 --workers 2 --image-size 32'",
      group_.string(), MLBENCH_STALL_BIN, MLBENCH_BENCH_DIR, (dir_ / "data").string(), out.string());
  const PinnedFiles pinned({fs::path(MLBENCH_STALL_BIN), fs::path(MLBENCH_BENCH_DIR) / "loader"});
  ASSERT_GT(pinned.count(), 2u) << "found no shared libraries of the loader with ldd";
  EXPECT_EQ(pinned.errors(), "");
  const auto r = mlbench::testing_support::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  std::ifstream in(out / "stall.json");
  const auto j = nlohmann::json::parse(in);

  // Storage as the throttle allows: its rate in files per second, within 25%
  // (the throttle's burst allowance lets a little more through). The throttle
  // counts the device's reads, whole 4 KiB pages: a 2.5 KB file costs 4 KiB.
  std::uintmax_t bytes = 0, files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "data")) {
    if (e.is_regular_file()) bytes += (e.file_size() + 4095) / 4096 * 4096, ++files;
  }
  const double throttle_rate = kThrottleBytesPerS / (static_cast<double>(bytes) / static_cast<double>(files));
  EXPECT_NEAR(j["rates"]["S_model"].get<double>(), throttle_rate, 0.25 * throttle_rate) << r.output;
  // Decoding 64x48 JPEGs is far faster than 0.5 MB/s of them: the cold epoch waits on fetch.
  EXPECT_GT(j["split"]["fetch_pct"].get<double>(), 80.0) << r.output;
  EXPECT_EQ(j["recommendation"]["bound"], "fetch-bound") << r.output;
  // The what-if at half the dataset in the item cache, against the speed measured
  // with it. The analyzer's goal is 5%; here, on a loaded 2-CPU machine, five runs
  // were 0.5-4.2% off, the measured speed 2.7% below the prediction on average
  // (with half the reads hits, fewer misses are in flight per worker's window than
  // in the cold run that measured storage, and the throttle's wait adds to each):
  // 7.5% leaves that bias and the spread room, and still fails a model that is
  // wrong (S alone, before it was pooled with the cold run, missed by 9.2% here).
  ASSERT_EQ(j["whatif"]["measured"].size(), 1u) << r.output;
  EXPECT_LT(j["whatif"]["measured"][0]["error_pct"].get<double>(), 7.5) << r.output;
  // The peer runs (docs/stall.md, "Partitioned cache"): 2 loader nodes at once on loopback, in
  // turn without and with peers, three pairs; every partitioned node fetched from its peer's cache
  // and no fetch failed.
  for (const char* label : {"peer-local", "peer-2"}) {
    ASSERT_TRUE(j["runs"].contains(label)) << label << "\n" << r.output;
    EXPECT_EQ(j["runs"][label]["nodes"].size(), 6u) << label;
  }
  for (const auto& node : j["runs"]["peer-2"]["nodes"]) {
    std::ifstream node_in(node["report"].get<std::string>());
    const auto report = nlohmann::json::parse(node_in);
    const auto& pc = report["pipeline"]["partitioned_cache"];
    ASSERT_TRUE(pc.is_object()) << node["report"];
    EXPECT_GT(pc["peer"]["cache_items"].get<long>(), 0) << node["report"];
    EXPECT_EQ(pc["peer_failures"], 0) << node["report"];
  }
  const auto& k = j["whatif"]["partitioned"]["peer_cpu"];
  EXPECT_EQ(k["nodes"], 2);
  EXPECT_TRUE(k["nodes_us"].is_number()) << k.dump();
  EXPECT_EQ(k["pairs_us"].size(), 3u) << k.dump();
  // Each pair's own p, and the prediction each pair makes alone, bounded by the range.
  EXPECT_EQ(k["pairs_local_cpu_per_item_us"].size(), 3u) << k.dump();
  for (const auto& pred : j["whatif"]["partitioned"]["predictions"]) {
    ASSERT_EQ(pred["partitioned_pairs"].size(), 3u) << pred.dump();
    for (const auto& each : pred["partitioned_pairs"]) {
      EXPECT_GE(each.get<double>(), pred["partitioned_range"][0].get<double>()) << pred.dump();
      EXPECT_LE(each.get<double>(), pred["partitioned_range"][1].get<double>()) << pred.dump();
    }
  }
  std::cout << fmt::format("[blkio {:.1f} MB/s] throttle {:.1f} files/s; S {:.1f}, cold F {:.1f}, S for the what-if "
                           "{:.1f}; fetch stall {:.1f}%; 50% cached: measured {:.1f}/s, predicted {:.1f}/s ({:.1f}% off)\n",
                           kThrottleBytesPerS / 1e6, throttle_rate, j["rates"]["S"].get<double>(),
                           j["rates"]["F_obs"].get<double>(), j["rates"]["S_model"].get<double>(),
                           j["split"]["fetch_pct"].get<double>(), j["whatif"]["measured"][0]["measured"].get<double>(),
                           j["whatif"]["measured"][0]["predicted"].get<double>(),
                           j["whatif"]["measured"][0]["error_pct"].get<double>());
}

}  // namespace
