// Storage with a set bandwidth, emulated over real files: a read whose pages
// are in the page cache is served at memory speed; a read that would go to the
// device is delayed as if a device of `mb_per_s` served requests one after
// another (a token bucket shared by every worker). So the page cache,
// posix_fadvise(DONTNEED) and --drop-after-read behave as with a slow disk.
// With --drop-after-read and a set bandwidth, a read that misses the page cache
// is emulated whole: zeros of the file's size, no real I/O, so a busy real disk
// cannot slow the emulated one.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "pipeline/source.h"

namespace mlbench::stallsim {

class EmulatedStorage : public pipeline::ItemSource {
 public:
  EmulatedStorage(std::shared_ptr<const pipeline::ImageFolderReader> files, double mb_per_s);

  std::size_t size() const override { return files_->size(); }
  std::int64_t label(std::size_t index) const override { return files_->label(index); }
  void fetch(std::size_t index, pipeline::Bytes& out) const override;
  pipeline::Encoding encoding() const override { return pipeline::Encoding::Jpeg; }
  std::string describe(std::size_t index) const override { return files_->describe(index); }

  // Reads served from the page cache / from the emulated device so far.
  long cached_reads() const;
  long device_reads() const;

 private:
  // Queues `bytes` on the emulated device: returns when that transfer ends,
  // after the requests queued before it.
  std::chrono::steady_clock::time_point reserve(std::size_t bytes) const;

  std::shared_ptr<const pipeline::ImageFolderReader> files_;
  double bytes_per_s_;
  mutable std::mutex mu_;
  mutable std::chrono::steady_clock::time_point device_free_{};
  mutable long cached_reads_ = 0, device_reads_ = 0;
};

}  // namespace mlbench::stallsim
