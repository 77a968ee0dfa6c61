#include "datasets/shard_writer.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "datasets/recipe.h"
#include "pipeline/sampler.h"
#include "pipeline/source.h"

namespace mlbench::datasets {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kBlock = 512;
constexpr std::uint64_t kEndOfArchive = 2 * kBlock;

std::uint64_t padded(std::uint64_t bytes) {
  return (bytes + kBlock - 1) / kBlock * kBlock;
}

// The member extension of an image file: its own when the shard reader takes it, else jpg.
std::string image_extension(const fs::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == ".jpeg" || ext == ".png") return ext.substr(1);
  return "jpg";
}

// One shard being written (libarchive's ustar writer, no compression, no padding past
// the end-of-archive blocks: the file is as long as shard_sample_bytes says).
class ShardFile {
 public:
  explicit ShardFile(const fs::path& path) : path_(path), a_(archive_write_new()) {
    if (!a_ || archive_write_set_format_ustar(a_) != ARCHIVE_OK || archive_write_add_filter_none(a_) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(a_, 10240) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a_, 1) != ARCHIVE_OK ||
        archive_write_open_filename(a_, path.c_str()) != ARCHIVE_OK) {
      fail("create");
    }
  }
  ~ShardFile() {
    if (a_) archive_write_free(a_);  // closes it (after an error: the folder is removed anyway)
  }
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;

  void add(const std::string& name, const void* data, std::size_t size) {
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_mtime(e.get(), 0, 0);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    if (archive_write_header(a_, e.get()) != ARCHIVE_OK) fail("write a header to");
    if (size > 0 && archive_write_data(a_, data, size) != static_cast<la_ssize_t>(size)) fail("write to");
  }

  void close() {
    if (archive_write_close(a_) != ARCHIVE_OK) fail("close");
    archive_write_free(a_);
    a_ = nullptr;
  }

 private:
  [[noreturn]] void fail(const char* what) {
    const char* why = a_ ? archive_error_string(a_) : nullptr;
    throw std::runtime_error(fmt::format("cannot {} {}: {}", what, path_.string(), why ? why : "libarchive failed"));
  }

  fs::path path_;
  archive* a_;
};

}  // namespace

std::uint64_t shard_sample_bytes(std::uint64_t image_bytes) {
  return kBlock + padded(image_bytes) + 2 * kBlock;  // image header + data, label header + its one block
}

ShardWriteResult write_shards(const ShardWriteOptions& o) {
  if (o.shard_bytes < shard_sample_bytes(0) + kEndOfArchive) {
    throw std::invalid_argument(
        fmt::format("--shard-size {} is smaller than one tar record of a sample", o.shard_bytes));
  }
  const pipeline::ImageFolderReader folder(o.from, "an ImageFolder: root/<class>/<image>");
  const std::vector<std::size_t> order = pipeline::Sampler(folder.size(), true, o.seed).epoch_indices(0);

  ShardWriteResult result;
  result.classes = folder.classes().size();
  std::vector<std::string> names;
  std::unique_ptr<ShardFile> shard;
  std::uint64_t shard_used = 0;
  pipeline::Bytes image;
  const auto close_shard = [&] {
    if (shard) shard->close();
    shard.reset();
  };
  // One thread: samples go in order; parallel_for brings the progress line and the
  // stop-signal checks every recipe has.
  parallel_for(static_cast<long>(order.size()), 1, o.show_progress, "shards", [&](long k) {
    const std::size_t i = order[static_cast<std::size_t>(k)];
    pipeline::read_file(folder.path(i), image, false);
    const std::uint64_t need = shard_sample_bytes(image.size());
    if (shard && shard_used + need + kEndOfArchive > o.shard_bytes) close_shard();
    if (!shard) {
      names.push_back(fmt::format("shard-{:06d}.tar", names.size()));
      shard = std::make_unique<ShardFile>(o.out / names.back());
      shard_used = 0;
    }
    const std::string key = fmt::format("{:08d}", k);
    const std::string label = std::to_string(folder.label(i));
    shard->add(key + "." + image_extension(folder.path(i)), image.data(), image.size());
    shard->add(key + ".cls", label.data(), label.size());
    shard_used += need;
    ++result.samples;
  });
  close_shard();
  result.shards = names.size();

  std::string classes, list;
  for (const std::string& c : folder.classes()) classes += c + "\n";
  for (const std::string& n : names) list += n + "\n";
  core::write_file_atomic(o.out / "classes.txt", classes, kDatasetFileDurability);
  core::write_file_atomic(o.out / "shards.shards", list, kDatasetFileDurability);
  return result;
}

}  // namespace mlbench::datasets
