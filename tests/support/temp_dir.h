// Test support: scratch directories under the system temp dir, the one helper
// every test uses for files it makes.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace mlbench::testing_support {

// A fresh, empty directory (mlbench_<name>_XXXXXX), removed with everything in it
// by the destructor unless keep() was called (e.g. to inspect a failed test).
class TempDir {
 public:
  explicit TempDir(const std::string& name = "test") {
    std::string pattern = (std::filesystem::temp_directory_path() / ("mlbench_" + name + "_XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern + " failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!keep_) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

// A fresh, empty directory under the temp dir, unique to this process and `name`,
// left in place (for fixtures that outlive one scope).
inline std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("mlbench_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace mlbench::testing_support
