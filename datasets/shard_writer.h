// mlbench-datagen shards: an ImageFolder packed into WebDataset-style tar shards
// (pipeline/shards.h reads them): samples in a shuffled order (seeded), keys
// %08d, members KEY.jpg (the file's bytes; .jpeg/.png keep their extension) and
// KEY.cls (the class index as decimal text), plain ustar with fixed metadata
// (mtime 0, uid/gid 0, mode 0644), so the same folder and seed give the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace mlbench::datasets {

struct ShardWriteOptions {
  std::filesystem::path from;               // an ImageFolder: root/<class>/<file>, classes sorted
  std::filesystem::path out;                // the folder to fill (exists)
  std::uint64_t shard_bytes = 64ull << 20;  // a shard is closed before a sample would take it past this
  std::uint64_t seed = 0;                   // the samples' order
  bool show_progress = true;
};

struct ShardWriteResult {
  std::size_t shards = 0, samples = 0, classes = 0;
};

// Writes out/shard-000000.tar, ... (at least one sample each, however large), out/classes.txt
// (the class names, one a line: label k is line k + 1) and out/shards.shards (the shard
// file names, one a line: a --data value). Throws pipeline::DataError for an unreadable
// folder or image, std::runtime_error for a write that fails.
ShardWriteResult write_shards(const ShardWriteOptions& options);

// The bytes a sample of `image_bytes` takes in a shard: two ustar headers, the image
// padded to 512 bytes, the label's block.
std::uint64_t shard_sample_bytes(std::uint64_t image_bytes);

}  // namespace mlbench::datasets
