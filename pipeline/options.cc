#include "pipeline/options.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/benchmark_run.h"
#include "core/environment.h"
#include "pipeline/http_source.h"

namespace mlbench::pipeline {

void add_pipeline_flags(core::BenchCli& cli, PipelineOptions& o) {
  add_prefetch_flag(cli, o.prefetch, "-1: 2 x workers, at least workers");
  cli.add_option("--io-depth", o.io_depth,
                 fmt::format("Reads in flight ahead of decoding, over the loader, on as many I/O threads (0: each "
                             "worker reads a sample, then decodes it). Default {0}; over HTTP, when not given: "
                             "adaptive from {0} up to {1}, doubled unless the measured read rate falls, settled at "
                             "the deepest depth within 10% of the best rate",
                             kDefaultIoDepth, kAdaptiveIoDepthBound),
                 core::ArgKind::Runtime)
      ->check(core::integer_in(0, 256))
      ->each([&o](const std::string&) { o.io_depth_given = true; })
      ->capture_default_str();
  cli.add_option("--io-engine", o.io_engine,
                 "How reads ahead are issued: threads (a pool of --io-depth I/O threads), io_uring (each worker's "
                 "own ring; image folders only, else threads) or auto (io_uring where it can serve)",
                 core::ArgKind::Runtime)
      ->check(CLI::IsMember({"auto", "threads", "io_uring"}))
      ->capture_default_str();
  cli.add_option("--cache-size", o.cache_size,
                 "Never-evicting item cache: items (1000), share of the dataset (40%) or bytes (2GiB); 0: off",
                 core::ArgKind::Runtime);
  cli.add_flag("--strict-data", o.strict_data, "A corrupt or unreadable sample is an error (default: skip and count)",
               core::ArgKind::Runtime);
  cli.add_option("--image-size", o.image_size, "Output image side (RandomResizedCrop size)")
      ->check(core::integer_in(8, 4096));
  cli.add_option("--output", o.output, "Batch element type: float32 (normalised) or uint8 (normalise on device)")
      ->check(CLI::IsMember({"float32", "uint8"}));
  cli.add_option("--decode", o.decode,
                 "Where JPEGs are decoded: cpu (the workers: decode, crop, resize, flip, normalise) or gpu (the "
                 "workers read and parse the header; nvJPEG decodes the batch on the CUDA device, which crops, "
                 "resizes, flips and normalises it; needs --cuda and a CUDA build)",
                 core::ArgKind::Runtime)
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->capture_default_str();
  cli.add_option("--nvjpeg-backend", o.nvjpeg_backend,
                 "--decode gpu: nvJPEG's backend: hardware (the GPU's JPEG engine, A100/H100), gpu-hybrid (Huffman "
                 "on the GPU), hybrid (Huffman on the consumer's CPU thread) or auto (the first of these that "
                 "decodes the first batch)",
                 core::ArgKind::Runtime)
      ->check(CLI::IsMember({"auto", "hardware", "gpu-hybrid", "hybrid"}))
      ->capture_default_str();
  cli.add_option("--fetch-timeout", o.fetch_timeout,
                 "Datasets over HTTP: seconds one request may take, connecting included, before it is retried",
                 core::ArgKind::Runtime)
      ->check(core::number_in(0.001, 86400.0))
      ->capture_default_str();
  cli.add_option("--fetch-retries", o.fetch_retries,
                 "Datasets over HTTP: retries of a request that failed transiently (a 5xx, a timeout, a reset or "
                 "truncated transfer), with a doubling back-off from 50 ms; then the sample counts as unreadable",
                 core::ArgKind::Runtime)
      ->check(core::integer_in(0, 100))
      ->capture_default_str();
  cli.add_flag("--no-stats", o.no_stats, "Pipeline stage timers off (to measure their overhead)",
               core::ArgKind::Runtime);
  cli.add_flag("--no-shuffle", o.no_shuffle, "Sequential order instead of a new permutation per epoch");
  cli.add_option("--shuffle-buffer", o.shuffle_buffer,
                 "Tar shards (--data DIR/*.tar): samples each lane holds to shuffle its stream, as WebDataset's "
                 "shuffle buffer (memory: about N x the mean sample size per worker; 0: each lane in file order)")
      ->check(core::integer_in(0, 1 << 24))
      ->capture_default_str();
  cli.add_flag("--keep-last", o.keep_last, "Keep the last, smaller batch of an epoch (default: drop it)");
  auto* drop = cli.add_flag("--drop-after-read", o.drop_after_read,
                           "Drop each file from the page cache after reading it: every read comes from storage");
  cli.add_flag("--hold-page-cache", o.hold_page_cache,
               "Leave the page cache as each read found it: drop a file after reading it only when it was not "
               "resident, so a resident fraction holds over every epoch (the analyzer's page-cache checks)")
      ->excludes(drop);
  cli.add_flag("--fetch-only", o.fetch_only,
               "Run the pipeline's fetch stage alone (no decode, augment, or model step): measures fetch rates");
  cli.add_option("--coordinated", o.coordinated,
                 "Coordinated prep: K processes started together with the same --group, --seed and data share "
                 "one epoch order; each preps 1/K of the batches and all consume every batch (0: off)",
                 core::ArgKind::Runtime)
      ->check(core::integer_in(0, kMaxCoordinatedMembers));
  cli.add_option("--group", o.group,
                 "Coordinated prep: the group's name (its shared memory: /dev/shm/mlbench-coord-NAME)",
                 core::ArgKind::Runtime);
  cli.add_option("--coordinated-timeout", o.coordinated_timeout,
                 "Coordinated prep: seconds without a heartbeat after which a member is dropped and its share "
                 "built by the others",
                 core::ArgKind::Runtime)
      ->check(core::number_in(0.01, 86400.0))
      ->capture_default_str();
  cli.add_option("--coordinated-join-timeout", o.coordinated_join_timeout,
                 "Coordinated prep: seconds the first member waits for the others to start", core::ArgKind::Runtime)
      ->check(core::number_in(0.0, 86400.0))
      ->capture_default_str();
  cli.add_option("--peers", o.peers,
                 "Partitioned cache: every node's host:port, in rank order (this node listens on its own); "
                 "each node caches the items i with i % nodes == its rank (--cache-size each) and asks the owner "
                 "for the others",
                 core::ArgKind::Runtime);
  cli.add_option("--rank", o.rank, "Partitioned cache: this node's rank (default: $RANK, else $SLURM_PROCID, else 0)",
                 core::ArgKind::Runtime)
      ->check(core::integer_in(0, 1 << 16));
  cli.add_option("--world", o.world, "Partitioned cache: the number of nodes (default: the number of --peers)",
                 core::ArgKind::Runtime)
      ->check(core::integer_in(1, 1 << 16));
  cli.add_option("--peer-timeout", o.peer_timeout,
                 "Partitioned cache: seconds one request to a peer may take; a peer that fails is skipped for 5 s "
                 "and its items are read from storage",
                 core::ArgKind::Runtime)
      ->check(core::number_in(0.001, 3600.0))
      ->capture_default_str();
  cli.add_option("--peer-join-timeout", o.peer_join_timeout,
                 "Partitioned cache: seconds a node waits at start for the others to be up (then it goes on, "
                 "reading their items from storage until they are)",
                 core::ArgKind::Runtime)
      ->check(core::number_in(0.0, 86400.0))
      ->capture_default_str();
  cli.add_option("--peer-linger", o.peer_linger,
                 "Partitioned cache: seconds a node that finished keeps answering peers that still ask (it leaves "
                 "after 1 s without a request; 0: at once)",
                 core::ArgKind::Runtime)
      ->check(core::number_in(0.0, 86400.0))
      ->capture_default_str();
  cli.add_option("--peer-batch", o.peer_batch,
                 "Partitioned cache: the most items one request to a peer asks for (with read-ahead, a batch's "
                 "items of each peer go in as few requests as this allows; 1: one request per item)",
                 core::ArgKind::Runtime)
      ->check(core::integer_in(1, static_cast<int>(kPeerMaxIds)))
      ->capture_default_str();
}

void add_prefetch_flag(core::BenchCli& cli, int& prefetch, const std::string& default_note) {
  cli.add_option("--prefetch", prefetch,
                 "Batches built ahead of the consumer, in flight or ready (0: each built on the consumer's thread; " +
                     default_note + ")",
                 core::ArgKind::Runtime)
      ->check(core::integer_in(-1, 1 << 20))
      ->capture_default_str();
}

LoaderConfig make_loader_config(const core::BenchOptions& bench, const PipelineOptions& o) {
  LoaderConfig c;
  c.batch_size = bench.batch_size;
  c.workers = bench.workers;
  c.prefetch = o.prefetch;
  c.io_depth = o.io_depth;
  c.adapt_io_depth = !o.io_depth_given;
  c.io_engine = parse_io_engine(o.io_engine);
  c.drop_last = !o.keep_last;
  c.shuffle = !o.no_shuffle;
  c.seed = static_cast<std::uint64_t>(bench.seed);
  c.transform.image_size = o.image_size;
  c.transform.output = o.output == "uint8" ? OutputType::Uint8 : OutputType::Float32;
  c.strict = o.strict_data;
  c.cache = parse_cache_size(o.cache_size);
  c.synthetic = bench.synthetic;
  c.stats = !o.no_stats;
  c.fetch_only = o.fetch_only;
  c.transform.decode_on_device = o.decode == "gpu";
  if (c.transform.decode_on_device && o.coordinated > 0) {
    throw std::invalid_argument("--decode gpu and --coordinated cannot be combined (the group shares decoded batches)");
  }
  if (c.transform.decode_on_device && o.fetch_only) {
    throw std::invalid_argument("--decode gpu decodes on the device: --fetch-only decodes nothing");
  }
  if (o.coordinated > 0 && o.group.empty()) throw std::invalid_argument("--coordinated needs --group NAME");
  if (o.coordinated == 0 && !o.group.empty()) throw std::invalid_argument("--group needs --coordinated K");
  if (o.coordinated > 0 && bench.synthetic) {
    throw std::invalid_argument("--coordinated shares the prep of real data: it cannot run with --synthetic");
  }
  if (o.coordinated > 0) coordinated_segment_name(o.group);  // throws for a bad name
  c.coordinated.members = o.coordinated;
  c.coordinated.group = o.group;
  c.coordinated.timeout_s = o.coordinated_timeout;
  c.coordinated.join_timeout_s = o.coordinated_join_timeout;
  if (!o.peers.empty()) {
    c.partition.peers = parse_peers(o.peers);
    c.partition.run = peers_text(c.partition.peers);  // what every node of the run is given alike
    const int n = c.partition.world();
    if (o.world > 0 && o.world != n) {
      throw std::invalid_argument(fmt::format("--world {} but --peers names {} nodes", o.world, n));
    }
    int rank = o.rank;
    for (const char* var : {"RANK", "SLURM_PROCID"}) {
      if (rank >= 0) break;
      const char* v = std::getenv(var);
      if (!v || !*v) continue;
      try {
        rank = core::env_int(var, v, 0);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string(e.what()) + " (a rank): set it right, or give --rank");
      }
    }
    c.partition.rank = rank < 0 ? 0 : rank;
    if (c.partition.rank >= n) {
      throw std::invalid_argument(fmt::format("--rank {} is not one of the {} nodes of --peers", c.partition.rank, n));
    }
    c.partition.timeout_s = o.peer_timeout;
    c.partition.join_timeout_s = o.peer_join_timeout;
    c.partition.linger_s = o.peer_linger;
    c.partition.max_ids_per_request = o.peer_batch;
    if (c.partition.world() > 1) c.partition.secret = load_peer_secret();
    if (bench.synthetic) throw std::invalid_argument("--peers partitions a cache of real data: not with --synthetic");
    if (o.coordinated > 0) throw std::invalid_argument("--peers and --coordinated cannot be combined yet");
    if (n > 1 && !c.cache.enabled()) {
      throw std::invalid_argument("--peers partitions the item cache: give each node's share with --cache-size");
    }
  } else if (o.rank >= 0 || o.world > 0) {
    throw std::invalid_argument("--rank and --world belong to a partitioned cache: give --peers too");
  }
  return c;
}

LoaderConfig benchmark_loader_config(const core::BenchOptions& bench, const PipelineOptions& options) {
  try {
    return make_loader_config(bench, options);
  } catch (const std::invalid_argument& e) {
    throw core::UsageError(e.what());
  }
}

std::shared_ptr<ImageFolderReader> open_image_folder(const std::string& root, const std::string& hint,
                                                     const PipelineOptions& options) {
  auto reader = std::make_shared<ImageFolderReader>(root, hint);
  reader->set_drop_after_read(options.drop_after_read);
  reader->set_hold_page_cache(options.hold_page_cache);
  return reader;
}

std::shared_ptr<ItemSource> open_image_source(const std::string& data, const std::string& hint,
                                              const PipelineOptions& options) {
  if (is_http_url(data)) {
    if (options.drop_after_read || options.hold_page_cache) {
      throw DataError("--drop-after-read and --hold-page-cache act on local files' page cache, not on " + data);
    }
    HttpOptions http;
    http.timeout_s = options.fetch_timeout;
    http.retries = options.fetch_retries;
    return std::make_shared<HttpSource>(data, http, hint);
  }
  if (is_shard_spec(data)) {
    if (options.hold_page_cache) {
      throw DataError("--hold-page-cache acts on image folders' files; tar shards take --drop-after-read (" + data +
                      ")");
    }
    TarShardOptions o;
    o.shuffle_buffer = static_cast<std::size_t>(options.shuffle_buffer);
    o.strict = options.strict_data;
    o.drop_after_read = options.drop_after_read;
    return std::make_shared<TarShardSource>(data, o, hint);
  }
  return open_image_folder(data, hint, options);
}

std::string datagen_hint(const core::BenchOptions& bench, const std::string& dataset) {
  return "generate it with: build/bin/mlbench-datagen ensure " + dataset + " --root " + bench.data_directory;
}

}  // namespace mlbench::pipeline
