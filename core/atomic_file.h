// Atomic file writing: content goes to a temporary file in the target's
// directory, which is renamed over the target once complete. Readers see the
// old file or the whole new one, never a part. Reports, markers, run-directory
// files and generated datasets are all written this way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace mlbench::core {

// Whether commit() waits for the bytes to reach the disk (fsync) before the
// rename. kNoFsync is for many files inside a folder that is itself renamed into
// place at the end (a generated dataset): there a sync per file buys nothing.
enum class Durability { kFsync, kNoFsync };

// One file being written. Creates the directory and the temporary file
// (`.<name>.XXXXXX`, mode 0644 at commit); the destructor removes the temporary
// file unless commit() renamed it into place. Errors throw std::runtime_error
// naming the path.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path file);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(std::string_view bytes);
  void write(std::span<const std::uint8_t> bytes);
  // Closes the temporary file and renames it over the target.
  void commit(Durability durability = Durability::kFsync);

 private:
  void discard() noexcept;

  std::filesystem::path file_;
  std::filesystem::path tmp_;
  int fd_ = -1;
};

// Writes `content` to `file` atomically (see AtomicFile).
void write_file_atomic(const std::filesystem::path& file, std::string_view content,
                       Durability durability = Durability::kFsync);
void write_file_atomic(const std::filesystem::path& file, std::span<const std::uint8_t> bytes,
                       Durability durability = Durability::kFsync);
// The JSON indented by 2, with a final newline.
void write_json_atomic(const std::filesystem::path& file, const nlohmann::json& value);

}  // namespace mlbench::core
