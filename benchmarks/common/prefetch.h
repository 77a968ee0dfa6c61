// The in-memory benchmarks' (vae, recom, translator) use of the pipeline's
// BatchPrefetcher: the --prefetch flag and the report's "pipeline" block.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cli.h"
#include "pipeline/batch_prefetcher.h"

namespace mlbench::bench {

inline void add_prefetch_flag(core::BenchCli& cli, int& depth) {
  cli.add_option("--prefetch", depth, "Batches built ahead on a background thread (0: on the training thread)",
                 core::ArgKind::Runtime)
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
}

// The report's "pipeline" block, after stopping the prefetch thread:
// {"source": "in-memory", "dataset", "items", "prefetch", "batches", "epochs",
// "make_s"}, or {"source": "synthetic"} when there is no prefetcher.
template <class Batch>
nlohmann::json prefetch_report(const std::shared_ptr<pipeline::BatchPrefetcher<Batch>>& p, const std::string& dataset,
                               std::size_t items, int depth) {
  if (!p) return {{"source", "synthetic"}};
  p->stop();
  return {{"source", "in-memory"}, {"dataset", dataset},       {"items", items},
          {"prefetch", depth},     {"batches", p->batches()},   {"epochs", p->epoch() + 1},
          {"make_s", p->make_seconds()}};
}

}  // namespace mlbench::bench
