// Atomic file writing with temporary file + rename (see atomic_file.h).
#include "atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

std::runtime_error io_error(const std::string& what, const std::filesystem::path& path) {
  return std::runtime_error(fmt::format("cannot {} {}: {}", what, path.string(), std::strerror(errno)));
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path file) : file_(std::move(file)) {
  const std::filesystem::path dir = file_.has_parent_path() ? file_.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create directory {}: {}", dir.string(), ec.message()));
  // Built piecewise: GCC 12 warns falsely (-Wrestrict) on "." + string.
  std::string tmp_name(".");
  tmp_name += file_.filename().string();
  tmp_name += ".XXXXXX";
  std::string tmpl = (dir / tmp_name).string();
  fd_ = mkstemp(tmpl.data());
  if (fd_ < 0) throw io_error("create a temporary file for " + file_.filename().string() + " in", dir);
  tmp_ = tmpl;
}

AtomicFile::~AtomicFile() {
  discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

void AtomicFile::write(std::string_view bytes) {
  if (fd_ < 0) throw std::logic_error("AtomicFile::write after commit: " + file_.string());
  const char* data = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const auto err = io_error("write", file_);  // the file the user knows, not the temporary
      discard();
      throw err;
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::write(std::span<const std::uint8_t> bytes) {
  write(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

void AtomicFile::commit(Durability durability) {
  if (fd_ < 0) throw std::logic_error("AtomicFile::commit twice: " + file_.string());
  auto fail = [&](const char* what) {
    const auto err = io_error(what, file_);
    discard();
    return err;
  };
  if (::fchmod(fd_, 0644) != 0) throw fail("chmod");
  if (durability == Durability::kFsync && ::fsync(fd_) != 0) throw fail("fsync");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw fail("close");
  if (std::rename(tmp_.c_str(), file_.c_str()) != 0) {
    const auto err = io_error("rename into place", file_);
    discard();
    throw err;
  }
  tmp_.clear();
}

void write_file_atomic(const std::filesystem::path& file, std::string_view content, Durability durability) {
  AtomicFile out(file);
  out.write(content);
  out.commit(durability);
}

void write_file_atomic(const std::filesystem::path& file, std::span<const std::uint8_t> bytes, Durability durability) {
  AtomicFile out(file);
  out.write(bytes);
  out.commit(durability);
}

void write_json_atomic(const std::filesystem::path& file, const nlohmann::json& value) {
  write_file_atomic(file, value.dump(2) + "\n");
}

}  // namespace mlbench::core
