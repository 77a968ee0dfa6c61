// Shared recipe logic: names, sizes, markers, ensure, seeding, the parallel loop.
#include "datasets/recipe.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/cli.h"
#include "core/progress.h"
#include "core/report_name.h"
#include "core/rng.h"
#include "core/stop_signals.h"

namespace mlbench::datasets {

namespace fs = std::filesystem;

// Bumped when a recipe's output changes for the same seed and size, so that the
// marker says which generator made a folder.
constexpr int kGeneratorVersion = 1;

namespace {

void throw_if_stopped() {
  if (const int sig = core::stop_signal()) throw core::Interrupted(sig);
}

// Temporary folders ".NAME.partial-PID" beside `dir` whose process is gone: a datagen
// killed by SIGKILL (or its runner's death) could not remove its own.
void remove_stale_partials(const fs::path& parent, const std::string& name) {
  const std::string prefix = "." + name + ".partial-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) != 0) continue;
    const std::string pid = n.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) == 0 || errno != ESRCH) continue;  // still running
    std::error_code rm;
    fs::remove_all(e.path(), rm);
    std::cerr << "mlbench-datagen: removed " << e.path().string() << " (left by process " << pid << ", which is gone)"
              << std::endl;
  }
}

}  // namespace

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

std::size_t size_index(const std::string& size) {
  const auto& names = size_names();
  const auto it = std::find(names.begin(), names.end(), size);
  if (it == names.end()) throw std::invalid_argument("unknown size '" + size + "' (tiny, small, full)");
  return static_cast<std::size_t>(it - names.begin());
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

std::string marker_differences(const fs::path& dataset_dir, const std::string& recipe, const RecipeOptions& options) {
  std::ifstream in(dataset_dir / kMarkerFile);
  const nlohmann::json marker = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!marker.is_object()) return {};
  std::string has, asked;
  const auto compare = [&](const char* field, const nlohmann::json& wanted) {
    if (!marker.contains(field) || marker[field] == wanted) return;
    const auto text = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    has += fmt::format("{}{} {}", has.empty() ? "" : ", ", field, text(marker[field]));
    asked += fmt::format("{}{} {}", asked.empty() ? "" : ", ", field, text(wanted));
  };
  compare("recipe", recipe);
  compare("size", options.size);
  compare("seed", options.seed);
  return has.empty() ? std::string() : has + " where " + asked + " was asked";
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
  remove_stale_partials(parent, dir.filename().string());
  const fs::path tmp = parent / fmt::format(".{}.partial-{}", dir.filename().string(), ::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  options.out = tmp;
  // The writes in flight finish; the workers stop between items.
  const core::StopSignals stop_signals(core::StopSignals::Calls::kRestart);
  try {
    recipe.generate(options);
    throw_if_stopped();  // a recipe that does not go through parallel_for
    write_marker(tmp, recipe.name, options);
  } catch (...) {
    fs::remove_all(tmp, ec);
    if (const int sig = core::stop_signal()) throw core::Interrupted(sig);
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
  return core::splitmix64(core::splitmix64(core::splitmix64(seed) ^ stream) ^ index);
}

void parallel_for(long count, int threads, bool show_progress, const std::string& label,
                  const std::function<void(long)>& work) {
  if (threads <= 0) threads = core::affinity_cpu_count();
  threads = static_cast<int>(std::max(1L, std::min<long>(threads, count)));
  std::atomic<long> done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex mu;

  // The calling thread runs the OpenMP team (it is one of its `threads`
  // workers); a separate thread only draws the progress line, every 200 ms.
  std::condition_variable finished_cv;
  bool finished = false;
  std::thread drawer;
  if (show_progress) {
    drawer = std::thread([&] {
      const bool tty = core::is_terminal(1);
      core::ProgressPrinter progress(std::cout, tty, static_cast<int>(count), label);
      long last_decile = 0;
      std::unique_lock<std::mutex> lock(mu);
      do {
        const long d = done.load();
        // A log gets one line per 10%, a terminal a live line.
        const long decile = d * 10 / std::max(1L, count);
        progress.update(static_cast<int>(d), std::nullopt, !tty && decile > last_decile);
        last_decile = decile;
      } while (!finished_cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return finished; }));
      if (!error) {
        progress.update(static_cast<int>(count), std::nullopt, true);
        progress.finish();
      }
    });
  }

#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (long i = 0; i < count; ++i) {
    // No exception may leave an OpenMP region: keep the first, skip the rest.
    if (failed.load(std::memory_order_relaxed)) continue;
    try {
      throw_if_stopped();
      work(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
      failed = true;
    }
    done.fetch_add(1);
  }

  if (drawer.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
    }
    finished_cv.notify_one();
    drawer.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace mlbench::datasets
