// mlbench-datagen: generates the datasets benchmarks read.
//   mlbench-datagen <recipe> --out DIR [--seed S] [--size tiny|small|full] [recipe flags]
//   mlbench-datagen ensure NAME --root DIR   (what the runner calls: DIR/NAME unless complete)
//   mlbench-datagen shards --from DIR --out OUT [--shard-size 64M] [--seed S]   (tar shards of an ImageFolder)
//   mlbench-datagen list
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/byte_size.h"
#include "core/cli.h"
#include "core/layout.h"
#include "core/stop_signals.h"
#include "datasets/recipe.h"
#include "datasets/shard_writer.h"
#include "pipeline/http_source.h"

namespace {

using namespace mlbench::datasets;
namespace fs = std::filesystem;

int fail(const std::string& message) {
  std::cerr << "mlbench-datagen: error: " << message << "\n";
  return 1;
}

std::string known_datasets() {
  std::string out;
  for (const Recipe& r : all_recipes()) {
    if (!out.empty()) out += ", ";
    out += r.name + "[-tiny|-small|-full]";
  }
  return out;
}

// A complete dataset is kept as it is: say so when it is not the one asked for.
void warn_if_different(const fs::path& dir, const Recipe& recipe, const RecipeOptions& options) {
  const std::string diff = marker_differences(dir, recipe.name, options);
  if (diff.empty()) return;
  std::cerr << "mlbench-datagen: warning: " << dir.string() << " was kept as it is: it holds " << diff
            << "; delete it, or give the recipe command --force, to regenerate it\n";
}

// "fake-imagenet, mnist, ...": the recipe commands.
std::string recipe_names() {
  std::string out;
  for (const Recipe& r : all_recipes()) out += (out.empty() ? "" : ", ") + r.name;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("mlbench-datagen: generate the datasets mlbench benchmarks read (deterministic for a seed; "
               "a complete dataset carries a marker file and is not regenerated)",
               "mlbench-datagen");
  app.require_subcommand(1);
  RecipeOptions common;
  int threads = 0;
  bool quiet = false;
  bool force = false;
  std::string out_dir;
  std::string root;
  std::string dataset;

  auto add_common = [&](CLI::App* sub) {
    sub->add_option("--seed", common.seed, "Random seed (same seed, same files)")->capture_default_str();
    sub->add_option("-j,--threads", threads, "Worker threads (0: one per available CPU)")
        ->check(mlbench::core::integer_at_least(0));
    sub->add_flag("-q,--quiet", quiet, "No progress line");
  };

  std::map<CLI::App*, const Recipe*> recipe_commands;
  for (const Recipe& r : all_recipes()) {
    CLI::App* sub = app.add_subcommand(r.name, r.description);
    sub->add_option("--out", out_dir, "Dataset folder to create")->required();
    sub->add_option("--size", common.size, "Size preset")->check(CLI::IsMember(size_names()))->capture_default_str();
    sub->add_flag("--force", force, "Regenerate even when DIR holds a complete dataset");
    add_common(sub);
    if (r.add_options) r.add_options(*sub);
    recipe_commands[sub] = &r;
  }
  CLI::App* ensure = app.add_subcommand("ensure", "Generate dataset NAME into ROOT/NAME unless it is complete");
  ensure->add_option("name", dataset, "Dataset name: " + known_datasets())->required();
  ensure->add_option("--root", root, "Data directory (e.g. $DATA_DIRECTORY)")->required();
  add_common(ensure);
  std::string shards_from;
  std::string shard_size = "64M";
  CLI::App* shards = app.add_subcommand(
      "shards",
      "Pack an ImageFolder into WebDataset-style tar shards (KEY.jpg + KEY.cls, samples shuffled by --seed; "
      "the same folder and seed give the same bytes) for the loader's --data OUT/*.tar or OUT/shards.shards");
  shards->add_option("--from", shards_from, "ImageFolder to pack (root/<class>/<image>)")->required();
  shards->add_option("--out", out_dir, "Folder to create: shard-000000.tar ..., classes.txt, shards.shards")
      ->required();
  shards
      ->add_option("--shard-size", shard_size,
                   "Largest shard (64M, 1GiB, ...): a shard is closed before a sample "
                   "would take it past this")
      ->capture_default_str();
  shards->add_flag("--force", force, "Regenerate even when OUT holds complete shards");
  shards->add_option("--seed", common.seed, "Random seed of the samples' order (same seed, same bytes)")
      ->capture_default_str();
  shards->add_flag("-q,--quiet", quiet, "No progress line");
  CLI::App* list = app.add_subcommand("list", "List the recipes");
  std::string listing_root;
  CLI::App* listing = app.add_subcommand(
      "listing",
      "Write ROOT/mlbench-listing.json: the objects of the ImageFolder at ROOT, for serving it over HTTP "
      "(--data http://HOST:PORT/PREFIX/, docs/pipeline.md)");
  listing->add_option("--root", listing_root, "The ImageFolder (e.g. data/fake-imagenet-small/train)")->required();

  app.set_version_flag("--version", mlbench::core::layout::version_line("mlbench-datagen"), "The version and the commit it was built from");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    // Without a known command first, CLI11 says only "A subcommand is required":
    // name what was given and what exists instead.
    std::string line = mlbench::core::parse_error_line(e);
    if (app.get_subcommands().empty()) {
      const std::string first = argc > 1 ? argv[1] : "";
      const std::string commands = "recipes: " + recipe_names() + "; commands: ensure, list, listing, shards";
      if (first.empty()) {
        line = "no recipe or command given (" + commands + ")";
      } else if (first[0] == '-') {
        line = "unknown option " + first + " before a recipe or command (usage: mlbench-datagen <recipe> --out DIR; " +
               commands + ")";
      } else {
        line = "unknown recipe or command '" + first + "' (" + commands + ")";
      }
    }
    std::cerr << "mlbench-datagen: error: " << line << " (see mlbench-datagen --help)\n";
    return 2;
  }
  common.threads = threads;
  common.show_progress = !quiet;

  try {
    if (list->parsed()) {
      for (const Recipe& r : all_recipes()) std::cout << fmt::format("{:<20} {}\n", r.name, r.description);
      return 0;
    }
    if (listing->parsed()) {
      const fs::path file = mlbench::pipeline::write_folder_listing(listing_root);
      std::cout << "Wrote " << file.string() << "\n";
      return 0;
    }
    if (ensure->parsed()) {
      const auto parsed = parse_dataset_name(dataset, all_recipes());
      if (!parsed) return fail(fmt::format("unknown dataset '{}' (known: {})", dataset, known_datasets()));
      common.size = parsed->size;
      const fs::path dir = fs::path(root) / dataset;
      if (ensure_dataset(*parsed->recipe, dir, common)) {
        std::cout << "Generated " << dir.string() << "\n";
      } else {
        std::cout << dir.string() << " is complete\n";
        warn_if_different(dir, *parsed->recipe, common);
      }
      return 0;
    }
    if (shards->parsed()) {
      std::uint64_t bytes = 0;
      try {
        bytes = mlbench::core::parse_byte_size(shard_size);
      } catch (const std::invalid_argument& e) {
        std::cerr << "mlbench-datagen: error: --shard-size: " << e.what() << "\n";
        return 2;
      }
      ShardWriteResult written;
      // ensure_dataset: written into a temporary folder renamed into place, removed when interrupted.
      const Recipe pack{"shards", "tar shards of an ImageFolder", [&](const RecipeOptions& ro) {
                          written = write_shards({.from = shards_from,
                                                  .out = ro.out,
                                                  .shard_bytes = bytes,
                                                  .seed = ro.seed,
                                                  .show_progress = ro.show_progress});
                        }};
      const fs::path dir(out_dir);
      if (force && is_complete(dir)) fs::remove_all(dir);
      if (ensure_dataset(pack, dir, common)) {
        std::cout << fmt::format("Generated {}: {} samples of {} classes in {} shards (--data {})\n", dir.string(),
                                 written.samples, written.classes, written.shards, (dir / "shards.shards").string());
      } else {
        std::cout << dir.string() << " is complete (use --force to regenerate)\n";
        warn_if_different(dir, pack, common);
      }
      return 0;
    }
    for (const auto& [sub, recipe] : recipe_commands) {
      if (!sub->parsed()) continue;
      const fs::path dir(out_dir);
      if (force && is_complete(dir)) fs::remove_all(dir);  // ours: it carries the marker
      if (ensure_dataset(*recipe, dir, common)) {
        std::cout << "Generated " << dir.string() << "\n";
      } else {
        std::cout << dir.string() << " is complete (use --force to regenerate)\n";
        warn_if_different(dir, *recipe, common);
      }
      return 0;
    }
  } catch (const mlbench::core::Interrupted& e) {
    std::cerr << "mlbench-datagen: interrupted; the partial dataset was removed\n";
    return 128 + e.signal();
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return fail("no command (see mlbench-datagen --help)");
}
