#include "pipeline/loader_report.h"

#include <cstdint>
#include <memory>

#include "pipeline/http_source.h"
#include "pipeline/loader.h"

namespace mlbench::pipeline {

nlohmann::json image_loader_report(const LoaderConfig& config, const PipelineStats& stats,
                                   const ImageLoaderFacts& facts) {
  nlohmann::json j = stats.to_json();
  std::string source = "synthetic";
  // A source that says more about itself (tar shards: their counters) names its kind there.
  nlohmann::json detail = facts.source ? facts.source->describe_json() : nlohmann::json();
  if (detail.is_object() && detail.contains("kind")) {
    source = detail["kind"].get<std::string>();
    if (detail.contains("dataset_bytes")) j["dataset_bytes"] = detail["dataset_bytes"];
  } else if (facts.source) {
    source = facts.source->encoding() == Encoding::Jpeg ? "image-folder" : "decoded";
  }
  j["source"] = source;
  // Absent in older reports, null for image folders and decoded images: read it as null.
  j["source_detail"] = detail.is_object() ? detail : nlohmann::json();
  const auto* folder = dynamic_cast<const ImageFolderReader*>(facts.source);
  if (folder) {
    j["root"] = folder->root().string();
    j["classes"] = folder->classes().size();
    j["dataset_bytes"] = folder->total_bytes();
  }
  if (const auto* http = dynamic_cast<const HttpSource*>(facts.source)) {
    j["root"] = http->url();
    j["classes"] = http->classes().size();
  }
  j["items_per_epoch"] = facts.items_per_epoch;
  j["batches_per_epoch"] = facts.batches_per_epoch;
  j["batch_size"] = config.batch_size;
  j["workers"] = config.workers;
  j["prefetch"] = facts.prefetch;
  // 0: serial (a worker reads a sample, then decodes it); absent in older reports means 0. An
  // adaptive depth's as run: the settled one (the analyzer's model reads it as the run's depth).
  j["io_depth"] = config.synthetic ? 0 : facts.io_depth;
  if (!config.synthetic && config.io_depth > 0) {
    const auto mean_ms = [](std::int64_t ns, std::int64_t n) {
      return n > 0 ? nlohmann::json(static_cast<double>(ns) * 1e-6 / static_cast<double>(n)) : nlohmann::json();
    };
    const double read_s = static_cast<double>(stats.io_read_ns()) * 1e-9;
    const auto reads = stats.io_reads();
    const double read_cpu_s = static_cast<double>(stats.io_read_cpu_ns()) * 1e-9;
    // Measured only where the source is not local files (pipeline/read_ahead.cc, ReadAhead::run).
    const bool cpu_timed = facts.source && !facts.source->reads_files() && facts.io_threads > 0;
    j["read_ahead"] = {
        {"engine", facts.io_engine},
        {"io_threads", facts.io_threads},
        {"window_per_worker", facts.read_window},
        {"reads", facts.reads_issued},
        {"inline_reads", facts.inline_reads},
        {"max_outstanding", facts.max_outstanding},
        // Absent in older reports: read it as null (a fixed depth).
        {"adaptive", facts.adaptive},
        {"read_busy_s", read_s},
        // The I/O threads' own CPU in their reads, for a source other than local files; null where
        // not measured (local files, io_uring), and absent in older reports (read it as null).
        {"read_cpu_s", cpu_timed ? nlohmann::json(read_cpu_s) : nlohmann::json()},
        {"cpu_per_read_us",
         cpu_timed && reads > 0 ? nlohmann::json(read_cpu_s * 1e6 / static_cast<double>(reads)) : nlohmann::json()},
        {"per_read_ms", reads > 0 ? nlohmann::json(read_s * 1e3 / static_cast<double>(reads)) : nlohmann::json()},
        // Where a read's cycle goes beside the read (threads engine; null where none was timed:
        // io_uring, no stats; absent in older reports): a queued read's wait for an I/O thread, a
        // read item's wait for its worker busy with another, a worker's wake-up after the read it
        // waited on, and the share of takes that waited (docs/pipeline.md, "Read-ahead").
        {"queue_wait_ms", mean_ms(stats.io_queue_wait_ns(), stats.io_queue_waits())},
        {"item_wait_ms", mean_ms(stats.io_item_wait_ns(), stats.io_item_waits())},
        {"wake_ms", mean_ms(stats.io_wake_ns(), stats.io_wakes())},
        {"takes_waited", stats.io_wakes() + stats.io_item_waits() > 0
                             ? nlohmann::json(static_cast<double>(stats.io_wakes()) /
                                              static_cast<double>(stats.io_wakes() + stats.io_item_waits()))
                             : nlohmann::json()}};
  } else {
    j["read_ahead"] = nullptr;
  }
  j["image_size"] = config.transform.image_size;
  j["transform"] = config.transform.mode == TransformMode::Train ? "train" : "eval";
  j["output"] = config.transform.output == OutputType::Float32 ? "float32" : "uint8";
  j["strict_data"] = config.strict;
  j["fetch_only"] = config.fetch_only;
  j["custom_prep"] = static_cast<bool>(config.prep);
  if (folder) {
    j["drop_after_read"] = folder->drop_after_read();
    j["hold_page_cache"] = folder->hold_page_cache();
  }
  if (const ItemCache* cache = facts.cache) {
    auto limit = [](std::uint64_t v) { return v == UINT64_MAX ? nlohmann::json() : nlohmann::json(v); };
    j["cache"] = {{"capacity_items", limit(cache->max_items())},
                  {"capacity_bytes", limit(cache->max_bytes())},
                  {"items", cache->items()},
                  {"bytes", cache->bytes()},
                  {"hits", cache->hits()},
                  {"misses", cache->misses()}};
  } else {
    j["cache"] = nullptr;
  }
  // Absent in older reports: read it as null (not coordinated).
  j["coordinated"] = facts.coordinated;
  // Absent in older reports: read it as null (no partitioned cache).
  j["partitioned_cache"] = facts.partitioned;
  return j;
}

nlohmann::json in_memory_report(const std::string& dataset, std::size_t items, int prefetch, long batches, long epochs,
                                double make_s) {
  return {{"source", "in-memory"}, {"dataset", dataset}, {"items", items},      {"prefetch", prefetch},
          {"batches", batches},    {"epochs", epochs},   {"make_s", make_s}};
}

}  // namespace mlbench::pipeline
