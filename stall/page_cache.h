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

struct ReadRate {
  double mb_per_s = 0;       // 1 MB = 1e6 bytes
  double files_per_s = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
};
// Reads whole files in the given order, timing it. `order` indexes `files`.
ReadRate read_rate(const std::vector<std::filesystem::path>& files, const std::vector<std::size_t>& order);

}  // namespace mlbench::stall
