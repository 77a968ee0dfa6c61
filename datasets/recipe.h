// The dataset recipes of mlbench-datagen and the logic every recipe shares:
// dataset names (recipe + optional -tiny/-small/-full suffix), the completion
// marker, and `ensure` (generate into a temporary folder, then rename, so a
// dataset folder is either complete or absent). Torch-free.
//
// Adding a recipe: one .cc file defining `Recipe my_recipe()`, its declaration
// below, one line in recipes.cc and one line in datasets/CMakeLists.txt.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/atomic_file.h"

namespace CLI {
class App;
}

namespace mlbench::datasets {

struct RecipeOptions {
  std::filesystem::path out;      // the dataset folder to fill (exists, empty or partial)
  std::uint64_t seed = 0;         // same seed, same bytes
  std::string size = "small";     // "tiny" (tests), "small" (fast.json), "full" (real runs)
  int threads = 0;                // 0: one per CPU of the affinity mask
  bool show_progress = true;      // progress line with ETA on stdout
};

struct Recipe {
  std::string name;
  std::string description;
  std::function<void(const RecipeOptions&)> generate;
  // Optional recipe-specific flags of `mlbench-datagen <name>` (e.g. --classes);
  // the values they bind are read by `generate`. Not used by `ensure`.
  std::function<void(CLI::App&)> add_options = {};
};

// One factory per recipe.
Recipe fake_imagenet_recipe();
Recipe mnist_recipe();      // datasets/mnist.cc (vae)
Recipe wikitext2_recipe();  // datasets/wikitext2.cc (wlm, wlmfp16)
Recipe ml20m_recipe();      // datasets/ml20m.cc (recom)
Recipe wmt16_recipe();      // datasets/wmt16.cc (translator)
Recipe bsds500_recipe();      // datasets/bsds500.cc (reso)
Recipe coco_shapes_recipe();  // datasets/coco_shapes.cc (ssd)
Recipe real_photos_recipe();  // datasets/real_photos.cc (loader on real photographs)

// Every recipe, in the order `mlbench-datagen --help` lists them (datasets/recipes.cc).
const std::vector<Recipe>& all_recipes();

const Recipe* find_recipe(const std::string& name);

// The size presets every recipe accepts.
inline const std::vector<std::string>& size_names() {
  static const std::vector<std::string> kSizes{"tiny", "small", "full"};
  return kSizes;
}

// The position of `size` in size_names(); throws std::invalid_argument naming
// it and the sizes that exist.
std::size_t size_index(const std::string& size);

// A recipe's preset for `size`: `tiny`, `small` or `full` (throws as size_index).
//   const auto [train, test] = by_size<std::pair<long, long>>(o.size, {256, 64}, {6000, 1000}, {60000, 10000});
template <class T>
T by_size(const std::string& size, T tiny, T small, T full) {
  switch (size_index(size)) {
    case 0:
      return tiny;
    case 1:
      return small;
    default:
      return full;
  }
}

// Recipes write their files with core's atomic writer (core/atomic_file.h) and
// this durability: no sync per file, since ensure_dataset renames the whole
// folder into place at the end (and a sync per image would slow generation).
inline constexpr core::Durability kDatasetFileDurability = core::Durability::kNoFsync;

// "fake-imagenet-small" -> {recipe "fake-imagenet", size "small"}; a bare recipe
// name means size "full". nullopt when no recipe matches.
struct DatasetName {
  const Recipe* recipe = nullptr;
  std::string size;
};
std::optional<DatasetName> parse_dataset_name(const std::string& name, const std::vector<Recipe>& recipes);

// The file whose presence means "this folder holds a complete dataset".
inline constexpr const char* kMarkerFile = ".mlbench-dataset-complete";
bool is_complete(const std::filesystem::path& dataset_dir);
// Writes the marker (JSON: recipe, size, seed, generator version) atomically.
void write_marker(const std::filesystem::path& dataset_dir, const std::string& recipe, const RecipeOptions& options);

// How the complete dataset in `dir` differs from the one asked for ("size small, seed 0
// where tiny, seed 5 was asked"), from its marker: recipe, size and seed; "" when
// it matches or the marker does not say. A kept dataset is reused, so the caller says this.
std::string marker_differences(const std::filesystem::path& dataset_dir, const std::string& recipe,
                               const RecipeOptions& options);

// Generates `recipe` into `dir` unless `dir` is complete. The work happens in a
// sibling temporary folder (.NAME.partial-PID) renamed into place at the end;
// temporary folders of NAME whose process is gone (killed mid-way) are removed first,
// and SIGINT/SIGTERM/SIGHUP while generating remove this one (then core::Interrupted,
// core/stop_signals.h).
// Returns true when it generated, false when the dataset already existed. Throws
// std::runtime_error.
bool ensure_dataset(const Recipe& recipe, const std::filesystem::path& dir, RecipeOptions options);

// Seed of item `index` of stream `stream` under a run seed: a stable mix
// (splitmix64), so items are independent of thread scheduling.
std::uint64_t item_seed(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

// Runs `work(i)` for i in [0, count) on `threads` OpenMP threads (0: affinity
// CPUs), items handed out one at a time, with a progress line labelled `label`
// when `show_progress`. `work` writes its result into slot i, so the output does
// not depend on the thread count. After an exception the remaining items are
// skipped; the first exception is rethrown once every thread stopped.
void parallel_for(long count, int threads, bool show_progress, const std::string& label,
                  const std::function<void(long)>& work);

}  // namespace mlbench::datasets
