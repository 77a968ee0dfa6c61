// The pipeline's command-line flags, registered once on a core::BenchCli so
// every benchmark that reads images shares them (--workers is core's).
#pragma once

#include <string>

#include "core/cli.h"
#include "pipeline/loader.h"
#include "pipeline/shards.h"

namespace mlbench::pipeline {

struct PipelineOptions {
  int prefetch = -1;                // --prefetch (-1: 2 x workers; 0: built on the consumer's thread)
  int io_depth = kDefaultIoDepth;   // --io-depth (0: serial fetch then decode)
  bool io_depth_given = false;      // --io-depth was given (else over HTTP the depth adapts)
  std::string io_engine = "auto";    // --io-engine auto|threads|io_uring
  std::string cache_size = "0";     // --cache-size
  bool strict_data = false;         // --strict-data
  int image_size = 224;             // --image-size
  std::string output = "float32";   // --output float32|uint8
  bool no_stats = false;            // --no-stats
  bool no_shuffle = false;          // --no-shuffle
  long shuffle_buffer = kDefaultShuffleBuffer;  // --shuffle-buffer (tar shards; 0: no shuffle within lanes)
  bool keep_last = false;           // --keep-last (drop_last off)
  bool drop_after_read = false;     // --drop-after-read (every read from storage)
  bool hold_page_cache = false;     // --hold-page-cache (drop only what a read brought in)
  bool fetch_only = false;          // --fetch-only (fetch stage alone, no model step)
  int coordinated = 0;              // --coordinated K (0: off; pipeline/remedies/coordinated.h)
  std::string group;                // --group NAME
  double coordinated_timeout = 10;  // --coordinated-timeout S
  double coordinated_join_timeout = 60;  // --coordinated-join-timeout S
  std::string peers;                // --peers host:port,... (a partitioned cache; empty: off)
  int rank = -1;                    // --rank (-1: $RANK, else $SLURM_PROCID, else 0)
  int world = 0;                    // --world (0: the number of --peers)
  double peer_timeout = 2;          // --peer-timeout S
  double peer_join_timeout = 30;    // --peer-join-timeout S
  double peer_linger = 10;          // --peer-linger S
  int peer_batch = 256;             // --peer-batch N (kPeerMaxIds)
  std::string decode = "cpu";       // --decode cpu|gpu (gpu: nvJPEG on the device, benchmarks/support/gpu_decode.h)
  std::string nvjpeg_backend = "auto";  // --nvjpeg-backend auto|hardware|gpu-hybrid|hybrid
  double fetch_timeout = 30;            // --fetch-timeout S (datasets over HTTP)
  int fetch_retries = 2;                // --fetch-retries N (datasets over HTTP)
};

void add_pipeline_flags(core::BenchCli& cli, PipelineOptions& options);

// --prefetch alone, for benchmarks over in-memory datasets (vae, recom,
// translator); the same meaning as the image loader's (docs/pipeline.md).
// `default_note` says what the default does.
void add_prefetch_flag(core::BenchCli& cli, int& prefetch, const std::string& default_note);

// A LoaderConfig from the shared and pipeline flags (train transforms).
// Throws std::invalid_argument for a bad --cache-size.
LoaderConfig make_loader_config(const core::BenchOptions& bench, const PipelineOptions& options);
// The same for a benchmark's set-up: a bad flag value is a core::UsageError (one line, exit 2).
LoaderConfig benchmark_loader_config(const core::BenchOptions& bench, const PipelineOptions& options);

// Opens an ImageFolder dataset with the reader flags (--drop-after-read) applied.
std::shared_ptr<ImageFolderReader> open_image_folder(const std::string& root, const std::string& hint,
                                                     const PipelineOptions& options);

// Opens the dataset `data` names: one served over HTTP (http://HOST:PORT/PREFIX/,
// pipeline/http_source.h, with --fetch-timeout and --fetch-retries), tar shards
// (is_shard_spec: DIR/*.tar, a .tar, a .shards list; pipeline/shards.h, with
// --shuffle-buffer and --strict-data), else an ImageFolder (open_image_folder).
// Throws DataError naming it (with `hint`; also for a reader flag the source does not
// take), or SourceUnavailable when its server does not answer.
std::shared_ptr<ItemSource> open_image_source(const std::string& data, const std::string& hint,
                                              const PipelineOptions& options);

// How to make the default dataset, for "missing dataset" errors.
std::string datagen_hint(const core::BenchOptions& bench, const std::string& dataset);

}  // namespace mlbench::pipeline
