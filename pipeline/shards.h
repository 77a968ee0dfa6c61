// WebDataset-style tar shards as an item source: samples grouped by key in plain
// (ustar/pax) tar files (`KEY.jpg` or .jpeg/.png, and `KEY.cls`, the label as
// decimal text), read sequentially per shard, in an epoch order the source plans
// itself: shards shuffled per epoch, dealt to lanes (one per loader worker), each
// lane a stream of its shards' items in file order through a shuffle buffer.
//
// NOTE [Tar shard reads]: at open every shard's headers are scanned once with
// libarchive (data skipped; only the small .cls read) into an index: per item its
// shard, member name, data offset and size, label. Reads then go by that index with
// pread, so any item can be read at any time (a retried fetch, the item cache, an
// order the source did not plan, e.g. --coordinated's). To keep the disk's view
// sequential, each shard has a cursor: a fetch of an item ahead of the cursor reads
// the shard forward up to it, in runs of up to kRunBytes, and keeps the bytes of the
// items it passed in memory until they are fetched (at most the shuffle buffer plus
// a few batches per shard: further ones are dropped and read again later); an item
// fetched a second time starts the shard's next pass (the next epoch). That is
// WebDataset's reader (a stream read in order, a shuffle buffer of samples in memory)
// while the loader's workers still fetch items of one batch in any order and
// concurrently. A fetch behind the cursor (not held) is one pread ("backward"); one
// far ahead (more items than the cursor may hold) jumps there ("skip"). Counters of
// each say how sequential an epoch was (stats()).
//
// A plain pread per item in planned order would have been simpler, but with a
// shuffle buffer the planned order is random within a window of N items, so the
// disk would see random reads over that window: the point of shards is that it
// does not.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/source.h"

namespace mlbench::pipeline {

// --shuffle-buffer's default: items held per lane (WebDataset's usual 1000).
inline constexpr std::size_t kDefaultShuffleBuffer = 1000;

// Whether a --data value names tar shards: a path ending in .tar, a glob pattern
// (containing '*', '?' or '['), or a shard list ending in .shards.
bool is_shard_spec(const std::string& spec);

// The shard files a spec names, in order: the one .tar, the glob's matches sorted,
// or the list's lines (blank lines and '#' comments skipped; each a path relative to
// the list's folder and below it: relative_path_problem, pipeline/relative_path.h).
// Throws DataError naming the spec when nothing matches, a listed shard is missing or
// refused (by line number and entry), or the list cannot be read.
std::vector<std::filesystem::path> resolve_shard_spec(const std::string& spec);

// An epoch's order over shards of `shard_items[s]` items each (shard s holds the
// consecutive indices after those of shards 0..s-1), as TarShardSource plans it:
// shards shuffled by (seed, epoch) when r.shuffle, dealt to r.lanes lanes (lane k:
// shards k, k + lanes, ...); each lane its shards' items in file order through a
// shuffle buffer of `shuffle_buffer` items (when r.shuffle and > 0: fill it, then
// emit a random one and put the next item in its place; drain in random order).
// Pure and deterministic. lane_streams gives the lanes; shard_epoch_order
// interleaves them batch by batch: whole batches round-robin over the lanes (batch
// j of the epoch from one lane), then each lane's last partial batch, in lane order.
std::vector<std::vector<std::size_t>> lane_streams(const std::vector<std::size_t>& shard_items,
                                                   const EpochOrderRequest& r, std::size_t shuffle_buffer);
std::vector<std::size_t> shard_epoch_order(const std::vector<std::size_t>& shard_items, const EpochOrderRequest& r,
                                           std::size_t shuffle_buffer);

struct TarShardOptions {
  // --shuffle-buffer (0: no shuffle within lanes)
  std::size_t shuffle_buffer = kDefaultShuffleBuffer;
  // --strict-data: a sample missing its image or .cls is an error
  bool strict = false;
  // --drop-after-read: drop the pages of each read from the page cache
  bool drop_after_read = false;
  // the skipped-samples line (default std::cerr)
  std::ostream* warnings = nullptr;
};

class TarShardSource : public ItemSource {
 public:
  // Reads of one run forward: up to this many bytes per pread.
  static constexpr std::size_t kRunBytes = 4u << 20;

  // Resolves `spec` (resolve_shard_spec) and scans every shard. Throws DataError for no
  // shards, a bad or truncated tar (naming the shard and byte offset), a member whose name
  // is not a relative path (relative_path_problem, after tar's leading "./"; naming the
  // shard, member and offset), no samples at all (naming `hint`, e.g. how to make them),
  // or under `strict` an incomplete sample.
  TarShardSource(const std::string& spec, TarShardOptions options = {}, const std::string& hint = {});
  ~TarShardSource() override;
  TarShardSource(const TarShardSource&) = delete;
  TarShardSource& operator=(const TarShardSource&) = delete;

  std::size_t size() const override { return items_.size(); }
  std::int64_t label(std::size_t index) const override { return items_[index].label; }
  void fetch(std::size_t index, Bytes& out) const override;
  // Only an item already read forward and held in memory.
  bool fetch_if_cached(std::size_t index, Bytes& out) const override;
  Encoding encoding() const override { return Encoding::Jpeg; }
  // "DIR/shard-000003.tar:00000042.jpg".
  std::string describe(std::size_t index) const override;
  // Every item's shard file name (not its folder), member name, size and label.
  std::uint64_t fingerprint() const override;
  std::optional<std::vector<std::size_t>> epoch_order(const EpochOrderRequest& request) const override;
  // {"kind": "tar-shards", "spec", "shards", "items", "skipped_samples", "shuffle_buffer",
  //  "lanes", "shuffle_buffer_bytes", counters of stats()}.
  nlohmann::json describe_json() const override;
  // classes.txt beside the first shard (mlbench-datagen shards writes it), else the largest label + 1.
  std::size_t class_count() const override;

  struct Stats {
    std::uint64_t shards_opened = 0;     // opens of a shard file (again after its descriptor was closed)
    std::uint64_t reads = 0;             // preads issued
    std::uint64_t bytes_read = 0;        // bytes they returned (tar headers and .cls included)
    std::uint64_t sequential_items = 0;  // items read by a cursor moving forward (or held since)
    std::uint64_t backward_items = 0;    // items behind their shard's cursor: a pread of their own
    std::uint64_t skipped_ahead = 0;     // items too far ahead: the cursor jumped to them
    std::uint64_t dropped_held = 0;      // items read forward but dropped before their fetch (bound reached)
    std::uint64_t rewinds = 0;           // a shard's stream started over (its next pass: the next epoch)
    std::uint64_t held_items_peak = 0;   // most items held in memory at once, over all shards
  };
  Stats stats() const;

  const std::vector<std::filesystem::path>& shards() const { return shards_; }
  std::size_t skipped_samples() const { return skipped_samples_; }
  std::size_t shuffle_buffer() const { return options_.shuffle_buffer; }
  std::uint64_t total_bytes() const { return total_bytes_; }  // of the image members

 private:
  struct Item {
    std::uint64_t offset = 0;  // of the member's data in its shard
    std::uint64_t size = 0;
    std::int64_t label = 0;
    std::uint32_t shard = 0;
    std::string member;  // "00000042.jpg"
  };
  struct Cursor;  // shards.cc

  void scan(std::size_t shard);
  Cursor& cursor(std::size_t shard) const;
  int open_fd(Cursor& c, std::size_t shard) const;
  void read_member(Cursor& c, std::size_t index, Bytes& out) const;
  void read_forward(Cursor& c, std::size_t through) const;
  bool take_held(Cursor& c, std::size_t index, Bytes& out) const;
  std::size_t hold_limit() const;
  [[noreturn]] void fail_read(std::size_t index, const std::string& why) const;

  std::string spec_;
  TarShardOptions options_;
  std::vector<std::filesystem::path> shards_;
  std::vector<std::size_t> shard_first_;  // index of each shard's first item (size: shards + 1)
  std::vector<Item> items_;
  std::size_t skipped_samples_ = 0;
  std::size_t shards_with_skips_ = 0;
  std::string first_skip_;  // "shard ... key ..." of the first skipped sample
  std::uint64_t total_bytes_ = 0;
  std::size_t classes_txt_ = 0;                   // lines of classes.txt beside the first shard (0: none)
  std::vector<std::unique_ptr<Cursor>> cursors_;  // one per shard
  // Per item: fetched in its shard's current pass (a second fetch starts the next pass).
  // Each shard's entries are touched under its cursor's lock only.
  mutable std::vector<std::uint8_t> delivered_;
  mutable std::atomic<int> open_fds_{0};
  mutable std::atomic<int> lanes_{0};  // as the loader last asked (0: not asked yet)
  mutable std::atomic<std::size_t> batch_size_{0};
  struct Counters;  // shards.cc: Stats as atomics
  std::unique_ptr<Counters> counters_;
};

}  // namespace mlbench::pipeline
