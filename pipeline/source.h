// Where items come from: an ImageFolder of encoded images read with pread
// (the layout of ImageNet and torchvision: root/<class>/<file>, classes sorted,
// label = class index), or pre-decoded images held in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pipeline/data_error.h"
#include "pipeline/item_cache.h"
#include "pipeline/sampler.h"

namespace mlbench::pipeline {

// How a source's bytes are to be read.
enum class Encoding { Jpeg, RawHwc };

// Reads the whole of `file` into `out` with pread; throws DataError naming it.
// `drop_after_read`: then drops its pages from the page cache (POSIX_FADV_DONTNEED).
// `size_hint`: the file's size when known (e.g. from a directory scan): the read then
// skips the fstat, asking for one byte more than the hint so that a file grown since
// is seen (it is then read to its end); a file that shrank is read to its end too.
// The result is the file's whole content either way.
void read_file(const std::filesystem::path& file, Bytes& out, bool drop_after_read = false,
               std::optional<std::size_t> size_hint = std::nullopt);

// Whether every page of the first `size` bytes of the open file `fd` is in the page
// cache (cachestat, else mincore over a mapping: it reads nothing itself). False when it cannot tell.
bool file_resident(int fd, std::size_t size);

// A read of one item's file that the caller issues itself (read-ahead's io_uring engine):
// the file, opened by ItemSource::open_file_read.
struct FileRead {
  int fd = -1;
  std::size_t expect = 0;  // the file's size as the scan saw it: read expect + 1 bytes (see read_file)
  bool drop = false;       // drop its pages after the read (--drop-after-read, --hold-page-cache)
};

class ItemSource {
 public:
  virtual ~ItemSource() = default;
  virtual std::size_t size() const = 0;
  virtual std::int64_t label(std::size_t index) const = 0;
  // The item's bytes into `out` (resized); throws DataError naming the item.
  virtual void fetch(std::size_t index, Bytes& out) const = 0;
  // The item's bytes when they can be had without waiting for storage (all in the
  // page cache); false when not, or on any error (fetch() then reads it and reports
  // the error). Read-ahead reads such items in the worker instead of handing them to
  // an I/O thread (a hand-off per cached item cost ~6% CPU on a fully cached set).
  virtual bool fetch_if_cached(std::size_t /*index*/, Bytes& /*out*/) const { return false; }
  // `items` will be fetched soon, in this order (read-ahead says so as it starts a batch): a
  // source whose items cross a network may ask for them together. Nothing by default.
  virtual void will_fetch(const std::vector<std::size_t>& /*items*/) const {}
  // Whether every item is one file read whole (ImageFolderReader): then read-ahead's io_uring
  // engine can issue the reads itself, with open_file_read and finish_file_read.
  virtual bool reads_files() const { return false; }
  // Opens the item's file (the fetch's open, and its page-cache policy decided); throws
  // DataError naming the item. Only for sources whose reads_files() is true.
  virtual FileRead open_file_read(std::size_t index) const;
  // After the caller read `got` bytes (or -errno) at offset 0 into `out`, resized to
  // r.expect + 1 first (nullopt: no read yet, the whole file is read here): reads on to the
  // end when the file grew, drops pages as r.drop says, closes r.fd, and leaves `out` as the
  // file's content, as fetch() would; throws DataError naming the item (r.fd closed).
  virtual void finish_file_read(std::size_t index, const FileRead& r, Bytes& out, std::optional<long> got) const;
  virtual Encoding encoding() const = 0;
  // For RawHwc sources: every item is height x width x channels uint8.
  virtual int raw_width() const { return 0; }
  virtual int raw_height() const { return 0; }
  virtual int raw_channels() const { return 0; }
  // A name for warnings ("root/n01/x.jpg").
  virtual std::string describe(std::size_t index) const = 0;
  // What the dataset is, as a 64-bit hash of every item's name (describe) and label:
  // sources that list the same items agree (a coordinated group holds its members to one).
  virtual std::uint64_t fingerprint() const;
  // The order of an epoch when the source plans it itself (tar shards: sequential streams
  // through a shuffle buffer, pipeline/shards.h); a permutation of [0, size()). nullopt (the
  // default): the loader's Sampler decides.
  virtual std::optional<std::vector<std::size_t>> epoch_order(const EpochOrderRequest& /*request*/) const {
    return std::nullopt;
  }
  // The report's pipeline.source_detail block ({"kind": ..., counters}); null (the default):
  // nothing beyond the pipeline block's own fields.
  virtual nlohmann::json describe_json() const;
  // How many classes the labels come from: by default the largest label + 1.
  virtual std::size_t class_count() const;
};

class ImageFolderReader : public ItemSource {
 public:
  // Scans `root`: one sub-folder per class (sorted by name), its regular files
  // sorted by name. Throws DataError for a missing or empty root (naming it and
  // `hint`, e.g. how to generate the dataset). Empty class folders keep their
  // label and are listed in empty_classes().
  explicit ImageFolderReader(std::filesystem::path root, const std::string& hint = {});

  std::size_t size() const override { return files_.size(); }
  std::int64_t label(std::size_t index) const override { return labels_[index]; }
  void fetch(std::size_t index, Bytes& out) const override;
  // preadv2(RWF_NOWAIT): fails fast when a page is not in the page cache.
  bool fetch_if_cached(std::size_t index, Bytes& out) const override;
  bool reads_files() const override { return true; }
  FileRead open_file_read(std::size_t index) const override;
  void finish_file_read(std::size_t index, const FileRead& r, Bytes& out, std::optional<long> got) const override;
  Encoding encoding() const override { return Encoding::Jpeg; }
  std::string describe(std::size_t index) const override { return files_[index].string(); }
  // Every file's path below the root, size (from the scan) and label: the same folder
  // copied elsewhere agrees, another set of files of the same count does not.
  std::uint64_t fingerprint() const override;

  std::size_t class_count() const override { return classes_.size(); }

  const std::vector<std::string>& classes() const { return classes_; }
  const std::vector<std::string>& empty_classes() const { return empty_classes_; }
  const std::filesystem::path& root() const { return root_; }
  const std::filesystem::path& path(std::size_t index) const { return files_[index]; }
  // --drop-after-read: drop each file's pages from the page cache right after
  // reading it (posix_fadvise DONTNEED), so every read comes from storage, as
  // with a dataset much larger than memory (the Mila suite's `nocache`).
  void set_drop_after_read(bool on) { drop_after_read_ = on; }
  bool drop_after_read() const { return drop_after_read_; }
  // --hold-page-cache: leave the page cache as each read found it: a file that was not
  // wholly resident when read is dropped after the read (so is its resident part), one
  // that was stays. A fixed resident fraction then holds over any number of epochs
  // (the analyzer's page-cache checks). Residency is asked per read (file_resident:
  // one cachestat call). --drop-after-read, when also on, wins.
  void set_hold_page_cache(bool on) { hold_page_cache_ = on; }
  bool hold_page_cache() const { return hold_page_cache_; }
  // Sum of file sizes (from the scan).
  std::uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::filesystem::path root_;
  std::vector<std::string> classes_;
  std::vector<std::string> empty_classes_;
  std::vector<std::filesystem::path> files_;
  std::vector<std::int64_t> labels_;
  std::vector<std::size_t> sizes_;  // from the scan: fetch's size hint (no fstat per read)
  // The root folder, opened once: fetch opens root-relative names with openat (the kernel
  // then walks two path components, not the whole path). Null when it could not be opened.
  struct DirFd;
  std::shared_ptr<const DirFd> root_fd_;
  std::size_t root_prefix_ = 0;  // characters of root_ (with its separator) at the start of every files_[i]
  // Opens item `index` for reading (from root_fd_ when there is one); -1 with errno on failure.
  int open_item(std::size_t index) const;
  std::uint64_t total_bytes_ = 0;
  bool drop_after_read_ = false;
  bool hold_page_cache_ = false;
};

// Pre-decoded images (HWC uint8, all the same shape) held in memory: no decode.
class DecodedTensorSource : public ItemSource {
 public:
  DecodedTensorSource(int width, int height, int channels, std::vector<Bytes> images, std::vector<std::int64_t> labels);
  std::size_t size() const override { return images_.size(); }
  std::int64_t label(std::size_t index) const override { return labels_[index]; }
  void fetch(std::size_t index, Bytes& out) const override { out = images_[index]; }
  Encoding encoding() const override { return Encoding::RawHwc; }
  int raw_width() const override { return width_; }
  int raw_height() const override { return height_; }
  int raw_channels() const override { return channels_; }
  std::string describe(std::size_t index) const override { return "decoded item " + std::to_string(index); }

 private:
  int width_, height_, channels_;
  std::vector<Bytes> images_;
  std::vector<std::int64_t> labels_;
};

}  // namespace mlbench::pipeline
