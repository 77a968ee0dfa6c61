#include "emulated_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

namespace mlbench::stallsim {

EmulatedStorage::EmulatedStorage(std::shared_ptr<const pipeline::ImageFolderReader> files, double mb_per_s)
    : files_(std::move(files)), bytes_per_s_(mb_per_s * 1e6) {}

std::chrono::steady_clock::time_point EmulatedStorage::reserve(std::size_t bytes) const {
  const auto now = std::chrono::steady_clock::now();
  if (bytes_per_s_ <= 0) return now;
  std::lock_guard<std::mutex> lock(mu_);
  const auto start = std::max(now, device_free_);
  device_free_ = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(static_cast<double>(bytes) / bytes_per_s_));
  return device_free_;
}

void EmulatedStorage::fetch(std::size_t index, pipeline::Bytes& out) const {
  const auto& path = files_->path(index);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw pipeline::DataError("cannot open " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  const auto size = static_cast<std::size_t>(st.st_size);
  const bool cached = pipeline::file_resident(fd, size);
  const auto device_done = cached ? std::chrono::steady_clock::time_point{} : reserve(size);
  // --hold-page-cache: a read that brought the file in drops it again, as the real reader does,
  // so that a run keeps the page cache as it found it (mlbench-stall's page-cache check).
  const bool drop = files_->drop_after_read() || (files_->hold_page_cache() && !cached);
  if (!cached && bytes_per_s_ > 0 && drop) {
    // A read that goes to the emulated device and leaves nothing in the page
    // cache never touches the real one: its content does not matter (stallsim's
    // prep does not look at it), and a real read may take longer than the
    // emulated one whenever the real disk is busy (a CI machine's neighbours),
    // which made cold runs slower than the injected rate: a prep-bound grid
    // config measured 20% fetch stall under a concurrent dd (docs/stall.md).
    ::close(fd);
    out.assign(size, 0);
    std::this_thread::sleep_until(device_done);
    std::lock_guard<std::mutex> lock(mu_);
    ++device_reads_;
    return;
  }
  // Otherwise the read must fill the page cache as a real one would: it
  // happens while the request waits its turn on the emulated device, so the
  // real device's own latency is hidden behind it while it is the shorter.
  out.resize(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out.data() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw pipeline::DataError("cannot read " + path.string());
    }
    done += static_cast<std::size_t>(n);
  }
  if (drop) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  if (!cached) std::this_thread::sleep_until(device_done);
  std::lock_guard<std::mutex> lock(mu_);
  ++(cached ? cached_reads_ : device_reads_);
}

long EmulatedStorage::cached_reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_reads_;
}

long EmulatedStorage::device_reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_reads_;
}

}  // namespace mlbench::stallsim
