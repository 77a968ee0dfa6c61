#include "page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "pipeline/shards.h"

namespace mlbench::stall {
namespace fs = std::filesystem;

namespace {
struct Fd {
  explicit Fd(const fs::path& p) : fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", p.string(), std::strerror(errno)));
  }
  ~Fd() { ::close(fd); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int fd;
};

std::uint64_t file_size(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_size);
}
}  // namespace

std::vector<fs::path> dataset_files(const fs::path& root) {
  // Tar shards (DIR/*.tar, a .tar, a .shards list): the shards are the dataset's files.
  if (pipeline::is_shard_spec(root.string())) return pipeline::resolve_shard_spec(root.string());
  std::error_code ec;
  if (!fs::exists(root, ec)) throw std::runtime_error(fmt::format("dataset {} does not exist", root.string()));
  std::vector<fs::path> files;
  if (fs::is_regular_file(root, ec)) {
    files.push_back(root);
  } else {
    for (const auto& e : fs::recursive_directory_iterator(root, ec)) {
      if (e.is_regular_file() && e.path().filename().string().front() != '.') files.push_back(e.path());
    }
  }
  if (files.empty()) throw std::runtime_error(fmt::format("dataset {} holds no file", root.string()));
  std::sort(files.begin(), files.end());
  return files;
}

Residency residency(const std::vector<fs::path>& files) {
  const long page = sysconf(_SC_PAGESIZE);
  Residency r;
  std::vector<unsigned char> vec;
  for (const auto& f : files) {
    Fd fd(f);
    const std::uint64_t size = file_size(fd.fd);
    ++r.files;
    r.bytes += size;
    if (size == 0) continue;
    const std::uint64_t pages = (size + page - 1) / page;
    void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.fd, 0);
    if (map == MAP_FAILED) throw std::runtime_error(fmt::format("cannot map {}: {}", f.string(), std::strerror(errno)));
    vec.assign(pages, 0);
    const int rc = mincore(map, size, vec.data());
    munmap(map, size);
    if (rc != 0) throw std::runtime_error(fmt::format("mincore failed on {}: {}", f.string(), std::strerror(errno)));
    r.pages += pages;
    for (unsigned char v : vec) r.resident_pages += (v & 1);
  }
  return r;
}

void evict(const std::vector<fs::path>& files) {
  for (const auto& f : files) {
    Fd fd(f);
    fdatasync(fd.fd);  // dirty pages cannot be dropped
    posix_fadvise(fd.fd, 0, 0, POSIX_FADV_DONTNEED);
  }
}

bool drop_caches() {
  ::sync();
  std::ofstream out("/proc/sys/vm/drop_caches");
  if (!out) return false;
  out << "3\n";
  out.flush();
  return static_cast<bool>(out);
}

std::uint64_t warm(const std::vector<fs::path>& files) {
  std::vector<char> buf(1 << 20);
  std::uint64_t total = 0;
  for (const auto& f : files) {
    Fd fd(f);
    posix_fadvise(fd.fd, 0, 0, POSIX_FADV_WILLNEED);
    ssize_t n;
    while ((n = ::read(fd.fd, buf.data(), buf.size())) > 0) total += static_cast<std::uint64_t>(n);
  }
  return total;
}

PinnedFiles::PinnedFiles(const std::vector<fs::path>& files) {
  maps_.reserve(files.size());
  for (const auto& f : files) {
    Fd fd(f);
    const std::uint64_t size = file_size(fd.fd);
    if (size == 0) {
      maps_.push_back({});
      continue;
    }
    void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.fd, 0);
    if (map == MAP_FAILED) {
      error_ = fmt::format("cannot map {}: {}", f.string(), std::strerror(errno));
      return;
    }
    if (mlock(map, size) != 0) {
      const int err = errno;
      munmap(map, size);
      error_ = fmt::format("cannot lock {} in memory: {}{}", f.string(), std::strerror(err),
                           err == EPERM || err == ENOMEM ? " (RLIMIT_MEMLOCK: ulimit -l, or CAP_IPC_LOCK)" : "");
      return;
    }
    maps_.push_back({map, size});
    bytes_ += size;
  }
}

PinnedFiles::~PinnedFiles() {
  for (const Map& m : maps_) {
    if (m.addr) munmap(m.addr, m.size);  // also unlocks
  }
}

ReadRate read_rate(const std::vector<fs::path>& files, const std::vector<std::size_t>& order) {
  std::vector<char> buf;
  ReadRate r;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i : order) {
    Fd fd(files.at(i));
    const std::uint64_t size = file_size(fd.fd);
    buf.resize(std::max<std::uint64_t>(size, 1));
    std::uint64_t off = 0;
    while (off < size) {
      const ssize_t n = ::pread(fd.fd, buf.data() + off, size - off, static_cast<off_t>(off));
      if (n <= 0) break;
      off += static_cast<std::uint64_t>(n);
    }
    r.bytes += off;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.seconds > 0) {
    r.mb_per_s = static_cast<double>(r.bytes) / 1e6 / r.seconds;
    r.files_per_s = static_cast<double>(order.size()) / r.seconds;
  }
  return r;
}

}  // namespace mlbench::stall
