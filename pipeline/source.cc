#include "pipeline/source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

namespace mlbench::pipeline {

namespace fs = std::filesystem;

namespace {

// A symbolic link that resolves to nothing, or round in a circle (ELOOP), or a class
// folder that is the dataset root itself: the scan names it instead of aborting.
[[noreturn]] void throw_bad_entry(const fs::path& entry, const std::error_code& ec) {
  throw DataError(
      "dataset entry " + entry.string() + ": " +
      (ec == std::errc::too_many_symbolic_link_levels ? "symbolic link loop (" + ec.message() + ")" : ec.message()));
}

// Whether `entry` is a directory (a regular file with `regular`), following symlinks;
// a dangling link is neither, a loop is an error.
bool entry_is(const fs::directory_entry& entry, bool regular) {
  std::error_code ec;
  const fs::file_status st = entry.status(ec);
  if (ec && ec != std::errc::no_such_file_or_directory) throw_bad_entry(entry.path(), ec);
  return regular ? fs::is_regular_file(st) : fs::is_directory(st);
}

// What a read leaves in the page cache: everything it read, nothing, or what was there
// before it (--hold-page-cache: the pages of a file it had to bring in are dropped).
enum class AfterRead { Keep, Drop, DropWhatItBroughtIn };
// --drop-after-read wins over --hold-page-cache.
AfterRead after_read(bool drop_after_read, bool hold_page_cache) {
  return drop_after_read ? AfterRead::Drop : hold_page_cache ? AfterRead::DropWhatItBroughtIn : AfterRead::Keep;
}

// Reads all of the open file `fd` into `out` and closes it; `shown` names it in errors.
void read_open(int fd, const fs::path& shown, Bytes& out, AfterRead after, std::optional<std::size_t> size_hint);
void read_rest(int fd, const fs::path& file, Bytes& out, std::size_t expect, bool size_known, bool drop,
               std::optional<long> first);
bool drops_after(int fd, AfterRead after, std::size_t expect);

}  // namespace

struct ImageFolderReader::DirFd {
  explicit DirFd(int f) : fd(f) {}
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  ~DirFd() { ::close(fd); }
  int fd;
};

ImageFolderReader::ImageFolderReader(fs::path root, const std::string& hint) : root_(std::move(root)) {
  const std::string suffix = hint.empty() ? "" : " (" + hint + ")";
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) {
    if (ec == std::errc::too_many_symbolic_link_levels) throw_bad_entry(root_, ec);
    throw DataError("dataset root " + root_.string() + " does not exist" + suffix);
  }
  std::vector<fs::path> class_dirs;
  for (const auto& entry : fs::directory_iterator(root_, ec)) {
    if (!entry_is(entry, false)) continue;
    std::error_code same;
    if (fs::equivalent(entry.path(), root_, same)) {
      throw DataError("dataset entry " + entry.path().string() + ": symbolic link loop (it is the dataset root " +
                      root_.string() + ")");
    }
    class_dirs.push_back(entry.path());
  }
  if (ec) throw DataError("cannot list dataset root " + root_.string() + ": " + ec.message());
  std::sort(class_dirs.begin(), class_dirs.end());
  for (std::size_t c = 0; c < class_dirs.size(); ++c) {
    classes_.push_back(class_dirs[c].filename().string());
    std::vector<std::pair<fs::path, std::uint64_t>> files;
    for (const auto& entry : fs::directory_iterator(class_dirs[c], ec)) {
      if (!entry_is(entry, true)) continue;
      std::error_code size_ec;
      const std::uintmax_t bytes = entry.file_size(size_ec);
      if (size_ec) throw_bad_entry(entry.path(), size_ec);
      files.emplace_back(entry.path(), bytes);
    }
    if (ec) throw DataError("cannot list class folder " + class_dirs[c].string() + ": " + ec.message());
    if (files.empty()) empty_classes_.push_back(classes_.back());
    std::sort(files.begin(), files.end());
    for (auto& [path, bytes] : files) {
      files_.push_back(std::move(path));
      labels_.push_back(static_cast<std::int64_t>(c));
      sizes_.push_back(static_cast<std::size_t>(bytes));
      total_bytes_ += bytes;
    }
  }
  const std::string prefix = (root_ / "").native();
  root_prefix_ = prefix.size();
  const bool all_under_root = std::all_of(files_.begin(), files_.end(), [&](const fs::path& f) {
    return f.native().size() > prefix.size() && f.native().compare(0, prefix.size(), prefix) == 0;
  });
  const int fd = all_under_root ? ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
  if (fd >= 0) root_fd_ = std::make_shared<const DirFd>(fd);
  if (files_.empty() && fs::is_directory(root_ / "train", ec)) {
    // A dataset's top folder (train/ and val/ below it) given instead of its split.
    throw DataError("no class directories under " + root_.string() + "; did you mean " + (root_ / "train").string() +
                    "? (expected root/<class>/<file>)" + suffix);
  }
  if (files_.empty()) {
    throw DataError("dataset root " + root_.string() + " has no images in class folders (expected root/<class>/<file>)" +
                    suffix);
  }
}

void read_file(const fs::path& file, Bytes& out, bool drop_after_read, std::optional<std::size_t> size_hint) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError("cannot open " + file.string() + ": " + std::strerror(errno));
  read_open(fd, file, out, drop_after_read ? AfterRead::Drop : AfterRead::Keep, size_hint);
}

namespace {

// Reads `fd` on to the end of the file into `out` (sized expect + 1 at the first read), then
// drops its pages when `drop` and closes it. `first`: the result of a first read at offset 0
// already done (a byte count or -errno), else none. `size_known`: `expect` is a hint (the
// scan's size: a file that shrank is read to its end); else fstat's (a shorter file is an error).
void read_rest(int fd, const fs::path& file, Bytes& out, std::size_t expect, bool size_known, bool drop,
               std::optional<long> first) {
  const auto fail = [&](const char* what, int err) {
    ::close(fd);
    throw DataError(std::string("cannot ") + what + " " + file.string() + ": " + std::strerror(err));
  };
  // Read until the end of the file. One byte more than expected is asked for: a read that
  // fills it means the file is longer than its size said (it grew), and the buffer grows.
  // A short read means the end of the file (a regular file's pread returns less only at its
  // end) unless fewer bytes than expected came: then one more read confirms the end.
  std::size_t done = 0;
  out.resize(expect + 1);
  while (true) {
    ssize_t n = 0;
    if (first) {
      n = static_cast<ssize_t>(*first);
      first.reset();
      if (n < 0) errno = static_cast<int>(-n);
    } else {
      n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("read", errno);
    done += static_cast<std::size_t>(n);
    if (done == out.size()) {
      out.resize(out.size() * 2);  // longer than expected
      continue;
    }
    if (n == 0 || done >= expect) break;  // the end of the file
  }
  if (!size_known && done < expect) {
    ::close(fd);
    throw DataError("cannot read " + file.string() + ": file shrank while reading");
  }
  out.resize(done);
  if (drop) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Whether a read under `after` drops the file's pages afterwards (asked before the read).
bool drops_after(int fd, AfterRead after, std::size_t expect) {
  return after == AfterRead::Drop || (after == AfterRead::DropWhatItBroughtIn && !file_resident(fd, expect));
}

void read_open(int fd, const fs::path& file, Bytes& out, AfterRead after, std::optional<std::size_t> size_hint) {
  std::size_t expect = 0;
  if (size_hint) {
    expect = *size_hint;
  } else {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw DataError("cannot stat " + file.string() + ": " + std::strerror(err));
    }
    expect = static_cast<std::size_t>(st.st_size);
  }
  read_rest(fd, file, out, expect, size_hint.has_value(), drops_after(fd, after, expect), std::nullopt);
}

}  // namespace

// cachestat(2) (Linux 6.5): the page-cache state of a file range without a mapping.
// Its structs are spelled here: older kernel headers lack them.
struct CachestatRange {
  std::uint64_t off, len;
};
struct Cachestat {
  std::uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
constexpr long kSysCachestat = 451;  // x86_64 and most architectures since 6.5

bool file_resident(int fd, std::size_t size) {
  if (size == 0) return true;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t pages = (size + page - 1) / page;
  // cachestat: one system call. A mapping + mincore + munmap costs far more in a process
  // with several threads (munmap flushes the other CPUs' TLBs), enough to slow the loader.
  static std::atomic<bool> no_cachestat{false};
  if (!no_cachestat.load(std::memory_order_relaxed)) {
    CachestatRange range{0, size};
    Cachestat st{};
    if (::syscall(kSysCachestat, fd, &range, &st, 0) == 0) return st.nr_cache >= pages;
    if (errno == ENOSYS || errno == EPERM) no_cachestat = true;  // an older kernel (or a seccomp filter)
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return false;
  std::vector<unsigned char> vec(pages);
  const bool ok = ::mincore(map, size, vec.data()) == 0;
  ::munmap(map, size);
  return ok && std::all_of(vec.begin(), vec.end(), [](unsigned char v) { return (v & 1) != 0; });
}

bool ImageFolderReader::fetch_if_cached(std::size_t index, Bytes& out) const {
  if (drop_after_read_) return false;  // every read is to come from storage
  const fs::path& file = files_[index];
  const int fd = open_item(index);
  if (fd < 0) return false;
  if (hold_page_cache_) {
    // Asked, not read with RWF_NOWAIT: a RWF_NOWAIT read of a page that is not resident
    // starts reading it (the kernel's readahead), and fetch() could then take it for resident.
    if (!file_resident(fd, sizes_[index])) {
      ::close(fd);
      return false;
    }
    try {
      read_open(fd, file, out, AfterRead::Keep, sizes_[index]);  // resident: nothing to drop
    } catch (const DataError&) {
      return false;  // fetch() reports it again
    }
    return true;
  }
  // As read_at with the scan's size hint: one byte more than expected is asked for, so a
  // file that grew is read to its end; a short read before the expected end means a page
  // that is not cached (RWF_NOWAIT stops there) or a file that shrank: fetch() decides.
  const std::size_t expect = sizes_[index];
  std::size_t done = 0;
  out.resize(expect + 1);
  bool ok = true;
  while (true) {
    iovec iov{out.data() + done, out.size() - done};
    const ssize_t n = ::preadv2(fd, &iov, 1, static_cast<off_t>(done), RWF_NOWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;  // EAGAIN: not cached; EOPNOTSUPP: no RWF_NOWAIT here
      break;
    }
    done += static_cast<std::size_t>(n);
    if (done == out.size()) {
      out.resize(out.size() * 2);
      continue;
    }
    if (done < expect) ok = false;
    break;
  }
  ::close(fd);
  if (ok) out.resize(done);
  return ok;
}

int ImageFolderReader::open_item(std::size_t index) const {
  const fs::path& file = files_[index];
  return root_fd_ ? ::openat(root_fd_->fd, file.c_str() + root_prefix_, O_RDONLY | O_CLOEXEC)
                  : ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
}

void ImageFolderReader::fetch(std::size_t index, Bytes& out) const {
  finish_file_read(index, open_file_read(index), out, std::nullopt);
}

FileRead ImageFolderReader::open_file_read(std::size_t index) const {
  const int fd = open_item(index);
  if (fd < 0) throw DataError("cannot open " + files_[index].string() + ": " + std::strerror(errno));
  return {fd, sizes_[index], drops_after(fd, after_read(drop_after_read_, hold_page_cache_), sizes_[index])};
}

void ImageFolderReader::finish_file_read(std::size_t index, const FileRead& r, Bytes& out,
                                         std::optional<long> got) const {
  read_rest(r.fd, files_[index], out, r.expect, true, r.drop, got);
}

FileRead ItemSource::open_file_read(std::size_t index) const {
  throw std::logic_error("open_file_read: " + describe(index) + " is not read as a file");
}

void ItemSource::finish_file_read(std::size_t index, const FileRead&, Bytes&, std::optional<long>) const {
  throw std::logic_error("finish_file_read: " + describe(index) + " is not read as a file");
}

DecodedTensorSource::DecodedTensorSource(int width, int height, int channels, std::vector<Bytes> images,
                                         std::vector<std::int64_t> labels)
    : width_(width), height_(height), channels_(channels), images_(std::move(images)), labels_(std::move(labels)) {
  const std::size_t expect = static_cast<std::size_t>(width) * height * channels;
  if (images_.size() != labels_.size()) throw std::invalid_argument("DecodedTensorSource: images and labels differ in count");
  for (const Bytes& b : images_) {
    if (b.size() != expect) throw std::invalid_argument("DecodedTensorSource: an image is not height x width x channels");
  }
}

namespace {

// FNV-1a, 64 bits.
struct Fnv {
  std::uint64_t h = 14695981039346656037ull;
  void add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  void add(const std::string& s) { add(s.data(), s.size() + 1); }  // with its terminator: "ab","c" != "a","bc"
  void add(std::uint64_t v) { add(&v, sizeof v); }
};

}  // namespace

std::uint64_t ItemSource::fingerprint() const {
  Fnv f;
  f.add(static_cast<std::uint64_t>(size()));
  for (std::size_t i = 0; i < size(); ++i) {
    f.add(describe(i));
    f.add(static_cast<std::uint64_t>(label(i)));
  }
  return f.h;
}

nlohmann::json ItemSource::describe_json() const {
  return nullptr;
}

std::size_t ItemSource::class_count() const {
  std::int64_t top = -1;
  for (std::size_t i = 0; i < size(); ++i) top = std::max(top, label(i));
  return static_cast<std::size_t>(top + 1);
}

std::uint64_t ImageFolderReader::fingerprint() const {
  Fnv f;
  f.add(static_cast<std::uint64_t>(files_.size()));
  for (std::size_t i = 0; i < files_.size(); ++i) {
    const std::string& path = files_[i].native();
    f.add(path.size() >= root_prefix_ ? path.substr(root_prefix_) : path);
    f.add(static_cast<std::uint64_t>(sizes_[i]));
    f.add(static_cast<std::uint64_t>(labels_[i]));
  }
  return f.h;
}

}  // namespace mlbench::pipeline
