// Test support: scratch directories under the system temp dir, the one helper
// every test uses for files it makes.
#pragma once

#include <ftw.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace mlbench::testing_support {

// Removes `dir` and everything in it (symbolic links not followed). Not
// std::filesystem::remove_all: a CUDA PyTorch's libtorch.so (the device
// machine's build, docs/gpu.md) exports its own copy of that symbol, which the
// test binaries then call, and it jumps to address 0.
inline void remove_tree(const std::filesystem::path& dir) {
  nftw(
      dir.c_str(), [](const char* file, const struct stat*, int, struct FTW*) { return std::remove(file); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

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
    if (!keep_) remove_tree(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

// A TempDir named after `prefix` and the running test (mlbench_<prefix>_<test>_XXXXXX),
// for fixtures' SetUp; call keep() from TearDown on failure to leave it for a look.
inline std::unique_ptr<TempDir> temp_dir_for_current_test(const std::string& prefix) {
  std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(test.begin(), test.end(), '/', '_');  // parameterised tests: Name/0
  return std::make_unique<TempDir>(prefix + "_" + test);
}

// A fresh, empty directory under the temp dir, unique to this process and `name`,
// left in place (for fixtures that outlive one scope).
inline std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("mlbench_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace mlbench::testing_support
