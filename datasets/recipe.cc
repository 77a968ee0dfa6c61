// Shared recipe logic: names, markers, ensure, seeding, the parallel loop.
#include "datasets/recipe.h"

#include <unistd.h>

#include <atomic>
#include <exception>
#include <fstream>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/cli.h"
#include "core/progress.h"
#include "core/report.h"

namespace mlbench::datasets {

namespace fs = std::filesystem;

// Bumped when a recipe's output changes for the same seed and size, so that the
// marker says which generator made a folder.
constexpr int kGeneratorVersion = 1;

const Recipe* find_recipe(const std::string& name) {
  for (const Recipe& r : all_recipes()) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::optional<DatasetName> parse_dataset_name(const std::string& name, const std::vector<Recipe>& recipes) {
  for (const Recipe& r : recipes) {
    if (name == r.name) return DatasetName{&r, "full"};
  }
  for (const std::string& size : size_names()) {
    const std::string suffix = "-" + size;
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string base = name.substr(0, name.size() - suffix.size());
    for (const Recipe& r : recipes) {
      if (base == r.name) return DatasetName{&r, size};
    }
  }
  return std::nullopt;
}

bool is_complete(const fs::path& dataset_dir) {
  std::error_code ec;
  return fs::is_regular_file(dataset_dir / kMarkerFile, ec);
}

void write_marker(const fs::path& dataset_dir, const std::string& recipe, const RecipeOptions& options) {
  const nlohmann::json marker{{"recipe", recipe},
                              {"size", options.size},
                              {"seed", options.seed},
                              {"generator_version", kGeneratorVersion},
                              {"created", core::utc_iso8601(std::chrono::system_clock::now())}};
  core::write_file_atomic(dataset_dir / kMarkerFile, marker.dump(2) + "\n");
}

bool ensure_dataset(const Recipe& recipe, const fs::path& dir, RecipeOptions options) {
  if (is_complete(dir)) return false;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    // Generation never writes into `dir` itself (temporary folder + rename), so a
    // non-empty folder without a marker is someone else's data: never delete it.
    throw std::runtime_error(fmt::format("{} exists but has no {} marker (not made by mlbench-datagen); "
                                         "move it away or delete it to generate {}",
                                         dir.string(), kMarkerFile, dir.filename().string()));
  }
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  fs::create_directories(parent);
  const fs::path tmp = parent / fmt::format(".{}.partial-{}", dir.filename().string(), ::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  options.out = tmp;
  try {
    recipe.generate(options);
    write_marker(tmp, recipe.name, options);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  if (fs::exists(dir, ec)) fs::remove(dir, ec);  // an empty folder only (checked above)
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp);
    if (is_complete(dir)) return false;  // another process finished the same dataset first
    throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", tmp.string(), dir.string(), ec.message()));
  }
  return true;
}

std::uint64_t item_seed(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  auto mix = [](std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(seed) ^ stream) ^ index);
}

void parallel_for(long count, int threads, bool show_progress, const std::string& label,
                  const std::function<void(long)>& work) {
  if (threads <= 0) threads = core::affinity_cpu_count();
  threads = static_cast<int>(std::max(1L, std::min<long>(threads, count)));
  std::atomic<long> next{0};
  std::atomic<long> done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex mu;
  auto body = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const long i = next.fetch_add(1);
      if (i >= count) break;
      try {
        work(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
      done.fetch_add(1);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(body);
  if (show_progress) {
    // The calling thread draws progress and works between draws.
    core::ProgressPrinter progress(std::cout, core::is_terminal(1), static_cast<int>(count), label);
    std::thread drawer_free_worker(body);
    const bool tty = core::is_terminal(1);
    long last_decile = 0;
    while (done.load() < count && !failed.load()) {
      const long d = done.load();
      // A log gets one line per 10%, a terminal a live line.
      const long decile = d * 10 / std::max(1L, count);
      progress.update(static_cast<int>(d), std::nullopt, !tty && decile > last_decile);
      last_decile = decile;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    drawer_free_worker.join();
    for (auto& t : pool) t.join();
    if (!error) {
      progress.update(static_cast<int>(count), std::nullopt, true);
      progress.finish();
    }
  } else {
    body();
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

void write_file(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

}  // namespace mlbench::datasets
