#include "plan.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "pipeline/http_source.h"
#include "pipeline/loader.h"

namespace mlbench::stall {

constexpr int kObservations = 10;
constexpr int kWarmupObservations = 2;

const char* to_string(CacheState s) {
  switch (s) {
    case CacheState::Warm: return "warm";
    case CacheState::Cold: return "cold";
    case CacheState::Partial: return "partial";
    case CacheState::Any: break;
  }
  return "any";
}

std::vector<std::string> iteration_args(int iterations, int warmup_observations) {
  const int number = std::max(1, (iterations + kObservations - 1) / kObservations);
  return {"--repeat", std::to_string(kObservations + warmup_observations), "--number", std::to_string(number),
          "--warmup", std::to_string(warmup_observations)};
}

std::vector<std::string> without_flags(const std::vector<std::string>& extra, const std::vector<std::string>& flags) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < extra.size(); ++i) {
    const std::string& a = extra[i];
    bool drop = false;
    for (const auto& f : flags) {
      if (a == f) {
        drop = true;
        if (i + 1 < extra.size() && extra[i + 1].rfind("-", 0) != 0) ++i;  // its value
      } else if (a.rfind(f + "=", 0) == 0) {
        drop = true;
      }
    }
    if (!drop) out.push_back(a);
  }
  return out;
}

namespace {
// A never-evicting cache fills during the first epoch, then every epoch has
// exactly the same number of misses, but a part of an epoch does not: so
// one observation is one whole epoch, the warm-up whole epochs covering the
// fill and the pipeline depth, and at least 3 epochs are timed. When an
// epoch is much longer than --iterations, observations of --iterations / 10
// with one epoch of warm-up are used instead (noisier).
std::vector<std::string> epoch_iteration_args(const StallConfig& c, std::size_t items, int batch_size,
                                              int pipeline_depth) {
  const int number = std::max(1, (c.iterations + kObservations - 1) / kObservations);
  const int epoch_iters = static_cast<int>(items / static_cast<std::size_t>(std::max(1, batch_size)));
  if (epoch_iters >= 1 && epoch_iters <= 2 * c.iterations) {
    const int warm_epochs = 1 + (pipeline_depth + epoch_iters - 1) / epoch_iters;
    const int timed_epochs = std::max(3, (c.iterations + epoch_iters - 1) / epoch_iters);
    return {"--repeat", std::to_string(warm_epochs + timed_epochs),
            "--number", std::to_string(epoch_iters),
            "--warmup", std::to_string(warm_epochs)};
  }
  return iteration_args(c.iterations, (epoch_iters + pipeline_depth + number - 1) / number + 1);
}
}  // namespace

bool remote_data(const StallConfig& c) {
  return pipeline::is_http_url(c.data);
}

namespace {
// Over HTTP the client has no page cache to warm or evict: "cached" means the item cache holds the
// whole dataset (filled in the warm-up epochs), "cold" that every sample is a GET; the server's
// own cache is left as it is. Then the --io-depth runs: held-out checks of the io-depth what-if.
std::vector<RunSpec> plan_remote_runs(const StallConfig& c, std::size_t items, int batch_size, int pipeline_depth) {
  std::vector<RunSpec> runs;
  const int number = std::max(1, (c.iterations + kObservations - 1) / kObservations);
  const int depth_warmup = std::max(kWarmupObservations, (pipeline_depth + number - 1) / number + 1);
  const auto epochs = epoch_iteration_args(c, items, batch_size, pipeline_depth);
  const auto add = [&](std::string label, std::string kind, std::vector<std::string> own, bool whole_epochs,
                       const std::vector<std::string>& extra) {
    RunSpec r;
    r.label = std::move(label);
    r.kind = std::move(kind);
    r.args = {"--data", c.data};
    const auto iters = whole_epochs ? epochs : iteration_args(c.iterations, depth_warmup);
    r.args.insert(r.args.end(), iters.begin(), iters.end());
    r.args.insert(r.args.end(), extra.begin(), extra.end());
    r.args.insert(r.args.end(), own.begin(), own.end());
    r.cache = CacheState::Any;
    runs.push_back(std::move(r));
    return &runs.back();
  };
  auto extra = without_flags(c.extra, {"--cache-size", "--drop-after-read", "--hold-page-cache"});
  // Every run at a known depth: without --io-depth the loader adapts its requests in flight over
  // HTTP, during the timed part too, so the runs would mix depths; they hold its starting depth,
  // and the what-if says which depth the curve reaches its best at.
  if (without_flags(extra, {"--io-depth"}).size() == extra.size()) {
    extra.insert(extra.end(), {"--io-depth", std::to_string(pipeline::kDefaultIoDepth)});
  }
  add("synthetic", "synthetic", {"--synthetic"}, false, extra);
  add("cached", "cached", {"--cache-size", "100%"}, true, extra);
  add("cold", "cold", {}, false, extra);
  add("fetch-cold", "fetch-cold", {"--fetch-only"}, false, extra);
  add("fetch-cached", "fetch-cached", {"--fetch-only", "--cache-size", "100%"}, true, extra);
  const auto sweep_extra = without_flags(extra, {"--workers", "-j", "--cpu-cores"});
  for (int n : c.cpus) {
    RunSpec* r = add(fmt::format("cpus-{}", n), "cpus",
                     {"--workers", std::to_string(n), "--cpu-cores", std::to_string(n), "--cache-size", "100%"}, true,
                     sweep_extra);
    r->cpus = n;
  }
  for (double x : c.cache_fracs) {
    RunSpec* r =
        add(fmt::format("cache-{:.2f}", x), "cache", {"--cache-size", fmt::format("{:g}%", 100.0 * x)}, true, extra);
    r->cache_frac = x;
  }
  const auto depth_extra = without_flags(extra, {"--io-depth"});
  for (int d : c.io_depths) {
    RunSpec* r = add(fmt::format("iodepth-{}", d), "iodepth", {"--io-depth", std::to_string(d)}, false, depth_extra);
    r->io_depth = d;
  }
  return runs;
}
}  // namespace

std::vector<RunSpec> plan_runs(const StallConfig& c, std::size_t items, int batch_size, int pipeline_depth) {
  if (remote_data(c)) return plan_remote_runs(c, items, batch_size, pipeline_depth);
  std::vector<RunSpec> runs;
  const int number = std::max(1, (c.iterations + kObservations - 1) / kObservations);
  const int depth_warmup = std::max(kWarmupObservations, (pipeline_depth + number - 1) / number + 1);
  const auto base = [&](std::vector<std::string> own, int warmup, const std::vector<std::string>& extra) {
    std::vector<std::string> args{"--data", c.data};
    for (auto& a : iteration_args(c.iterations, warmup)) args.push_back(std::move(a));
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), own.begin(), own.end());
    return args;
  };
  const auto add = [&](std::string label, std::string kind, std::vector<std::string> own, CacheState cache,
                       int warmup, const std::vector<std::string>* extra = nullptr) {
    RunSpec r;
    r.label = std::move(label);
    r.kind = std::move(kind);
    r.args = base(std::move(own), warmup, extra ? *extra : c.extra);
    r.cache = cache;
    runs.push_back(std::move(r));
    return &runs.back();
  };
  add("synthetic", "synthetic", {"--synthetic"}, CacheState::Any, depth_warmup);
  add("cached", "cached", {}, CacheState::Warm, depth_warmup);
  add("cold", "cold", {"--drop-after-read"}, CacheState::Cold, depth_warmup);
  add("fetch-cold", "fetch-cold", {"--fetch-only", "--drop-after-read"}, CacheState::Cold, depth_warmup);
  add("fetch-cached", "fetch-cached", {"--fetch-only"}, CacheState::Warm, depth_warmup);
  const auto sweep_extra = without_flags(c.extra, {"--workers", "-j", "--cpu-cores"});
  for (int n : c.cpus) {
    RunSpec* r = add(fmt::format("cpus-{}", n), "cpus",
                     {"--workers", std::to_string(n), "--cpu-cores", std::to_string(n)}, CacheState::Warm,
                     depth_warmup, &sweep_extra);
    r->cpus = n;
  }
  // Whole epochs (epoch_iteration_args).
  for (double x : c.cache_fracs) {
    RunSpec* r = add(fmt::format("cache-{:.2f}", x), "cache",
                     {"--cache-size", fmt::format("{:g}%", 100.0 * x), "--drop-after-read"}, CacheState::Cold,
                     depth_warmup);
    r->cache_frac = x;
    // Replace the default iteration flags (they follow --data in every run).
    const auto iters = epoch_iteration_args(c, items, batch_size, pipeline_depth);
    std::copy(iters.begin(), iters.end(), r->args.begin() + 2);
  }
  // The page-cache what-if's self-check: fraction x of the files resident, and held so (a read
  // that brought a file in drops it again), whole epochs as the cache runs.
  for (double x : c.page_fracs) {
    if (!(x > 0 && x < 1)) continue;
    RunSpec* r = add(fmt::format("page-{:.2f}", x), "page", {"--hold-page-cache"}, CacheState::Partial, depth_warmup);
    r->cache_frac = x;
    const auto iters = epoch_iteration_args(c, items, batch_size, pipeline_depth);
    std::copy(iters.begin(), iters.end(), r->args.begin() + 2);
  }
  return runs;
}

RunSpec spec_of_label(const std::string& label) {
  RunSpec r;
  r.label = label;
  r.kind = label;
  const auto after = [&](const char* prefix) -> std::optional<std::string> {
    const std::string p = prefix;
    if (label.size() <= p.size() || label.compare(0, p.size(), p) != 0) return std::nullopt;
    return label.substr(p.size());
  };
  try {
    if (const auto n = after("cpus-")) {
      r.kind = "cpus";
      r.cpus = std::stoi(*n);
    } else if (const auto x = after("cache-")) {
      r.kind = "cache";
      r.cache_frac = std::stod(*x);
    } else if (const auto y = after("page-")) {
      r.kind = "page";
      r.cache_frac = std::stod(*y);
    } else if (const auto k = after("synthetic-x")) {
      r.kind = "synthetic-shared";
      r.nodes = std::stoi(*k);
    } else if (const auto d = after("iodepth-")) {
      r.kind = "iodepth";
      r.io_depth = std::stoi(*d);
    } else if (label == "peer-local") {
      r.kind = "peer";
    } else if (const auto m = after("peer-")) {
      r.kind = "peer";
      r.nodes = std::stoi(*m);
      r.peers = true;
    }
  } catch (const std::exception&) {
    r.kind = label;  // not a planned label: its own kind
  }
  return r;
}

std::string peer_runs_memory_problem(int nodes, std::uint64_t dataset_bytes, std::uint64_t available_bytes) {
  const double need = static_cast<double>(nodes + 1) * static_cast<double>(dataset_bytes);
  if (available_bytes == 0 || need <= static_cast<double>(available_bytes) / 2) return "";
  return fmt::format(
      "{} nodes each caching the whole dataset and the page cache holding it ({} x {:.0f} MB) need more "
      "than half the memory available ({:.0f} MB)",
      nodes, nodes + 1, dataset_bytes / 1e6, available_bytes / 1e6);
}

std::vector<RunSpec> plan_peer_runs(const StallConfig& c, std::size_t items, int batch_size, int pipeline_depth) {
  std::vector<RunSpec> runs;
  if (c.peer_nodes < 2) return runs;
  const auto extra = without_flags(c.extra, {"--cache-size", "--peers", "--rank", "--world", "--drop-after-read"});
  const auto add = [&](std::string label, std::string share, bool peers) {
    RunSpec r;
    r.label = std::move(label);
    r.kind = "peer";
    r.args = {"--data", c.data};
    for (auto& a : epoch_iteration_args(c, items, batch_size, pipeline_depth)) r.args.push_back(std::move(a));
    r.args.insert(r.args.end(), extra.begin(), extra.end());
    r.args.insert(r.args.end(), {"--cache-size", std::move(share)});
    r.cache = CacheState::Warm;
    r.nodes = c.peer_nodes;
    r.peers = peers;
    runs.push_back(std::move(r));
  };
  add("peer-local", "100%", false);
  add(fmt::format("peer-{}", c.peer_nodes), fmt::format("{:.4f}%", 100.0 / c.peer_nodes), true);
  return runs;
}

std::vector<RunSpec> plan_shared_device_runs(const StallConfig& c, const std::vector<int>& jobs) {
  std::vector<RunSpec> runs;
  for (int k : jobs) {
    if (k < 2) continue;
    RunSpec r;
    r.label = fmt::format("synthetic-x{}", k);
    r.kind = "synthetic-shared";
    r.args = {"--data", c.data};
    for (auto& a : iteration_args(kSharedDeviceLength * c.iterations, kWarmupObservations)) r.args.push_back(std::move(a));
    r.args.insert(r.args.end(), c.extra.begin(), c.extra.end());
    r.args.push_back("--synthetic");
    r.cache = CacheState::Any;
    r.nodes = k;
    runs.push_back(std::move(r));
  }
  return runs;
}

}  // namespace mlbench::stall
