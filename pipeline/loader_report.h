// The report's "pipeline" block (docs/pipeline.md, docs/report-format.md): of
// the image loader (stage statistics, configuration, cache and source), and of
// a loader over an in-memory dataset (vae, recom, translator).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/data_loader.h"

namespace mlbench::pipeline {

struct LoaderConfig;
class ItemSource;
class ItemCache;

// What the image loader knows beyond its configuration.
struct ImageLoaderFacts {
  const ItemSource* source = nullptr;  // null: --synthetic
  const ItemCache* cache = nullptr;    // null: no item cache
  std::size_t items_per_epoch = 0;
  std::size_t batches_per_epoch = 0;
  int prefetch = 0;                    // as run
  int io_depth = 0;                    // read-ahead's depth as run (adaptive: at the end, the settled one once settled)
  std::string io_engine = "threads";    // read-ahead's engine as run
  int io_threads = 0;                  // read-ahead's I/O threads (0 with io_uring)
  std::size_t read_window = 0;         // read-ahead: reads each worker keeps ahead (0: none)
  long reads_issued = 0;               // read-ahead: reads handed to the I/O threads
  long inline_reads = 0;               // read-ahead: page-cache hits read by the worker when issued
  int max_outstanding = 0;             // read-ahead: most reads issued and not yet taken at once
  nlohmann::json adaptive;             // read-ahead: DepthController::to_json when the depth adapted; null: fixed
  nlohmann::json coordinated;          // --coordinated: the group's block (pipeline/remedies/coordinated.h); null: off
  nlohmann::json partitioned;          // --peers: partitioned_cache_report (pipeline/remedies/peer_cache.h); null: off
};
nlohmann::json image_loader_report(const LoaderConfig& config, const PipelineStats& stats,
                                   const ImageLoaderFacts& facts);

// {"source": "in-memory", "dataset", "items", "prefetch", "batches", "epochs",
// "make_s"}: batches handed out, epochs started, seconds spent building batches.
nlohmann::json in_memory_report(const std::string& dataset, std::size_t items, int prefetch, long batches, long epochs,
                                double make_s);

// The same block for `loader` after stopping it, or {"source": "synthetic"}
// when there is no loader.
template <class B>
nlohmann::json in_memory_report(DataLoader<B>* loader, const std::string& dataset, std::size_t items) {
  if (!loader) return {{"source", "synthetic"}};
  loader->stop();
  return in_memory_report(dataset, items, loader->options().prefetch, static_cast<long>(loader->stats().batches()),
                          std::max<long>(1, loader->epochs_started()), loader->build_seconds());
}

}  // namespace mlbench::pipeline
