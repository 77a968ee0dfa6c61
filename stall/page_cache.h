// The page cache as the analyzer sees it: which part of a dataset is resident
// (mincore), making it cold (posix_fadvise DONTNEED, or drop_caches as root)
// or warm (reading it), and how fast its files read from storage and memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mlbench::stall {

// Every regular file under `root` (recursively), sorted; throws with the path
// when root does not exist or holds no file.
std::vector<std::filesystem::path> dataset_files(const std::filesystem::path& root);

struct Residency {
  std::uint64_t pages = 0;
  std::uint64_t resident_pages = 0;
  std::uint64_t bytes = 0;
  std::size_t files = 0;
  double fraction() const { return pages ? static_cast<double>(resident_pages) / static_cast<double>(pages) : 0.0; }
};

// Resident pages of the files, from mincore over a read-only mapping of each.
Residency residency(const std::vector<std::filesystem::path>& files);

// Asks the kernel to drop the files' clean pages (posix_fadvise DONTNEED; no root needed).
void evict(const std::vector<std::filesystem::path>& files);
// sync + echo 3 > /proc/sys/vm/drop_caches; false when not permitted.
bool drop_caches();
// Reads every file once (making it resident).
std::uint64_t warm(const std::vector<std::filesystem::path>& files);

// Holds files in the page cache while it lives: each is mapped and locked in
// memory (mmap + mlock, which reads in what is not resident), so neither the
// kernel's reclaim nor a host's proactive reclaim can take its pages back (a
// VM's DAMON "pageout" scheme takes pages of a dataset read every second;
// docs/stall.md, "What it measures"), nor can posix_fadvise(DONTNEED). Unlocked
// and unmapped on destruction. Pins what it can: it stops at the first file that cannot be
// locked (RLIMIT_MEMLOCK without CAP_IPC_LOCK, too many mappings, no memory)
// and says why in error(); what was pinned stays pinned.
class PinnedFiles {
 public:
  explicit PinnedFiles(const std::vector<std::filesystem::path>& files);
  ~PinnedFiles();
  PinnedFiles(const PinnedFiles&) = delete;
  PinnedFiles& operator=(const PinnedFiles&) = delete;

  bool complete() const { return error_.empty(); }
  const std::string& error() const { return error_; }  // empty when every file is pinned
  std::uint64_t bytes() const { return bytes_; }       // pinned
  std::size_t files() const { return maps_.size(); }   // pinned (empty files count, unmapped)

 private:
  struct Map {
    void* addr = nullptr;
    std::size_t size = 0;
  };
  std::vector<Map> maps_;
  std::uint64_t bytes_ = 0;
  std::string error_;
};

struct ReadRate {
  double mb_per_s = 0;       // 1 MB = 1e6 bytes
  double files_per_s = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
};
// Reads whole files in the given order, timing it. `order` indexes `files`.
ReadRate read_rate(const std::vector<std::filesystem::path>& files, const std::vector<std::size_t>& order);

}  // namespace mlbench::stall
