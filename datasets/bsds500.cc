// bsds500: natural-image-like JPEGs at BSDS500's size (481x321, a third of
// them portrait 321x481) in DIR/{train,val,test}/images/, the input of reso.
// Photo-like content (datasets/fake_imagenet.h) so decode cost and crops
// behave like the real set. Sizes: tiny 16/0/0, small 200/0/0, full 200/100/200.
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "datasets/fake_imagenet.h"
#include "datasets/recipe.h"
#include "datasets/vision_sets.h"

namespace mlbench::datasets {

namespace fs = std::filesystem;

Bsds500Config bsds500_preset(const std::string& size) {
  return by_size<Bsds500Config>(size, {16, 0, 0, 90}, {200, 0, 0, 90}, {200, 100, 200, 90});
}

Recipe bsds500_recipe() {
  Recipe r;
  r.name = "bsds500";
  r.description = "natural-image-like JPEGs at 481x321 as BSDS500 (train/val/test each images/); "
                  "tiny 16, small 200, full 200/100/200 (reso)";
  r.generate = [](const RecipeOptions& o) {
    const Bsds500Config cfg = bsds500_preset(o.size);
    struct Split {
      const char* name;
      int count;
    };
    const Split splits[] = {{"train", cfg.train}, {"val", cfg.val}, {"test", cfg.test}};
    std::vector<std::pair<int, int>> items;  // (split, index)
    for (int s = 0; s < 3; ++s) {
      if (splits[s].count == 0) continue;
      fs::create_directories(o.out / splits[s].name / "images");
      for (int i = 0; i < splits[s].count; ++i) items.emplace_back(s, i);
    }
    parallel_for(static_cast<long>(items.size()), o.threads, o.show_progress, "bsds500", [&](long k) {
      const auto [s, i] = items[static_cast<std::size_t>(k)];
      const std::uint64_t seed = item_seed(o.seed, 10 + static_cast<std::uint64_t>(s), static_cast<std::uint64_t>(i));
      const bool portrait = seed % 3 == 0;
      const int w = portrait ? 321 : 481, h = portrait ? 481 : 321;
      const auto rgb = synthesize_photo_like(seed, w, h);
      core::write_file_atomic(o.out / splits[s].name / "images" / fmt::format("{:06d}.jpg", i),
                              encode_jpeg_rgb(rgb.data(), w, h, cfg.quality), kDatasetFileDurability);
    });
  };
  return r;
}

}  // namespace mlbench::datasets
