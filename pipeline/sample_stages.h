// The per-sample stages of the image loader: fetch (item cache or source) ->
// decode (region of interest) -> augment (resize, flip) -> collate (into the
// sample's slot of the batch), each timed as its stage. A bad sample (corrupt,
// unreadable) is counted, warned about once, and replaced by another of the
// same epoch; under --strict-data it is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "pipeline/batch.h"
#include "pipeline/item_cache.h"
#include "pipeline/jpeg_decoder.h"
#include "pipeline/read_ahead.h"
#include "pipeline/source.h"
#include "pipeline/stats.h"
#include "pipeline/trace.h"
#include "pipeline/transforms.h"

namespace mlbench::pipeline {

struct StageConfig {
  TransformConfig transform;
  std::uint64_t seed = 0;         // with epoch and position, seeds each sample's augmentation
  bool strict = false;            // a bad sample is an error (default: skip, count, warn once)
  bool fetch_only = false;        // fetch alone: the batch holds labels and zeroed pixels
  // When set, replaces decode and augment (timed as "decode"; pixels left zero).
  std::function<void(const Bytes& data, std::size_t index)> prep;
  std::ostream* warnings = nullptr;  // where "skipping ..." lines go (default std::cerr)
};

// One builder's scratch: reused for every sample it loads.
struct SampleWorker {
  JpegDecoder decoder;
  Image decoded;
  Bytes bytes;
  std::vector<std::uint8_t> hwc;
  BatchCounters counters;
  TraceRecorder::Track* track = nullptr;
  bool timed = false;             // read the clock (stats on, or a trace track)
};

class SampleStages {
 public:
  // `cache`: null for none.
  SampleStages(std::shared_ptr<const ItemSource> source, StageConfig config, ItemCache* cache);

  int channels() const { return channels_; }
  const StageConfig& config() const { return config_; }
  // Bytes of one sample in a batch.
  std::size_t sample_bytes() const;

  // Loads order[position] (or, when it is bad, a deterministic replacement of
  // the same epoch) into slot `slot` of `batch`; counts into w.counters.
  // Throws DataError under --strict-data, or after 17 bad samples in a row.
  // `reads`: the batch's read-ahead stream (null: read here, serially); its
  // next item must be order[position]. A replacement is read here either way.
  void load(SampleWorker& w, const std::vector<std::size_t>& order, std::size_t position, long epoch, Batch& batch,
            int slot, ReadStream* reads = nullptr);

 private:
  void warn_once(std::size_t index, const std::string& why);

  std::shared_ptr<const ItemSource> source_;
  StageConfig config_;
  ItemCache* cache_;
  int channels_ = 3;
  std::mutex warn_mu_;
  std::set<std::size_t> warned_;
};

}  // namespace mlbench::pipeline
