#include "core/atomic_file.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

namespace mlbench::core {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int count_entries(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(WriteAtomic, WritesWholeFileCreatesDirectoryAndLeavesNoTemporary) {
  const testing_support::TempDir tmp("atomic_file_atomic");
  const fs::path dir = tmp.path();
  const fs::path file = dir / "sub" / "r.json";
  write_json_atomic(file, nlohmann::json{{"a", 1}});
  std::ifstream in(file);
  EXPECT_EQ(nlohmann::json::parse(in)["a"], 1);
  // Replace: readers see the new content, and only one file exists.
  write_json_atomic(file, nlohmann::json{{"a", 2}});
  std::ifstream in2(file);
  EXPECT_EQ(nlohmann::json::parse(in2)["a"], 2);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir / "sub")) ++entries;
  EXPECT_EQ(entries, 1);
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::others_read, fs::perms::others_read);
}

TEST(WriteAtomic, FailureNamesThePathAndKeepsTheOldFile) {
  const testing_support::TempDir tmp("atomic_file_fail");
  const fs::path dir = tmp.path();
  const fs::path file = dir / "r.json";
  write_file_atomic(file, "old");
  // A directory where the target's parent should be: cannot create.
  const fs::path blocked = dir / "r.json" / "x.json";
  try {
    write_file_atomic(blocked, "new");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.string()), std::string::npos) << e.what();
  }
  std::ifstream in(file);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "old");
}

TEST(WriteAtomic, BytesInPiecesWithoutFsync) {
  const testing_support::TempDir tmp("atomic_file_pieces");
  const fs::path dir = tmp.path();
  const fs::path file = dir / "data.bin";
  const std::vector<std::uint8_t> bytes{0, 1, 2, 255};
  {
    AtomicFile out(file);
    out.write("head:");
    out.write(bytes);
    EXPECT_FALSE(fs::exists(file)) << "visible before commit";
    out.commit(Durability::kNoFsync);
  }
  EXPECT_EQ(read_all(file), std::string("head:\0\x01\x02\xff", 9));
  write_file_atomic(dir / "v.bin", bytes, Durability::kNoFsync);
  EXPECT_EQ(read_all(dir / "v.bin"), std::string("\0\x01\x02\xff", 4));
  EXPECT_EQ(count_entries(dir), 2);
}

TEST(WriteAtomic, AbandonedFileLeavesNothingAndKeepsTheOld) {
  const testing_support::TempDir tmp("atomic_file_abandon");
  const fs::path dir = tmp.path();
  const fs::path file = dir / "r.txt";
  write_file_atomic(file, "old");
  {
    AtomicFile out(file);
    out.write("half of the new");
  }  // no commit: an exception unwound past it, say
  EXPECT_EQ(read_all(file), "old");
  EXPECT_EQ(count_entries(dir), 1);
}

}  // namespace
}  // namespace mlbench::core
