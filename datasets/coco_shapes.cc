// coco-shapes: a COCO-like detection set for ssd. Each image is a photo-like
// background with 1..6 filled shapes whose category sets their form
// (rectangle, ellipse, triangle, diamond) and colour; boxes are the exact
// bounds of the painted pixels. Layout as COCO 2017:
//   DIR/train2017/<12 digits>.jpg
//   DIR/annotations/instances_train2017.json  (images, annotations, categories)
// Sizes: tiny 32, small 512, full 118287 images (COCO train2017's count).
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/rng.h"
#include "datasets/fake_imagenet.h"
#include "datasets/recipe.h"
#include "datasets/vision_sets.h"

namespace mlbench::datasets {

namespace fs = std::filesystem;

CocoShapesConfig coco_shapes_preset(const std::string& size) {
  CocoShapesConfig c;
  c.images = by_size(size, 32, 512, 118287);
  return c;
}

namespace {

// Whether pixel (px, py) of a w x h box is inside shape `form` (0 rect, 1 ellipse, 2 triangle, 3 diamond).
bool inside(int form, double px, double py, double w, double h) {
  const double u = (px + 0.5) / w, v = (py + 0.5) / h;  // [0, 1] within the box
  switch (form) {
    case 0: return true;
    case 1: return (u - 0.5) * (u - 0.5) + (v - 0.5) * (v - 0.5) <= 0.25;
    case 2: return std::abs(u - 0.5) <= 0.5 * v;
    default: return std::abs(u - 0.5) + std::abs(v - 0.5) <= 0.5;
  }
}

}  // namespace

ShapesImage render_shapes_image(std::uint64_t seed, const CocoShapesConfig& config) {
  // Chained splitmix64 (each output is the next state): not core::Rng's
  // sequence, and kept so that generated sets stay byte-identical.
  std::uint64_t state = seed;
  auto next = [&] { return state = core::splitmix64(state); };
  auto uniform = [&](int lo, int hi) { return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1)); };
  ShapesImage im;
  const bool portrait = next() % 4 == 0;
  const int long_side = uniform(500, 640), short_side = uniform(360, 480);
  im.width = portrait ? short_side : long_side;
  im.height = portrait ? long_side : short_side;
  im.rgb = synthesize_photo_like(seed ^ 0x5bd1e995ULL, im.width, im.height);
  const int objects = uniform(1, std::max(1, config.max_objects));
  for (int k = 0; k < objects; ++k) {
    const int category = uniform(1, config.categories);
    const int form = (category - 1) % 4;
    const std::uint64_t colour = core::splitmix64(static_cast<std::uint64_t>(category) * 7919);
    const std::uint8_t rgb[3] = {static_cast<std::uint8_t>(colour), static_cast<std::uint8_t>(colour >> 8),
                                 static_cast<std::uint8_t>(colour >> 16)};
    const int bw = uniform(24, im.width / 2), bh = uniform(24, im.height / 2);
    const int bx = uniform(0, im.width - bw), by = uniform(0, im.height - bh);
    int x0 = im.width, y0 = im.height, x1 = -1, y1 = -1;
    for (int y = 0; y < bh; ++y) {
      for (int x = 0; x < bw; ++x) {
        if (!inside(form, x, y, bw, bh)) continue;
        const std::size_t p = (static_cast<std::size_t>(by + y) * im.width + (bx + x)) * 3;
        std::copy(rgb, rgb + 3, im.rgb.begin() + static_cast<std::ptrdiff_t>(p));
        x0 = std::min(x0, bx + x), x1 = std::max(x1, bx + x);
        y0 = std::min(y0, by + y), y1 = std::max(y1, by + y);
      }
    }
    if (x1 - x0 + 1 >= 12 && y1 - y0 + 1 >= 12) im.boxes.push_back({x0, y0, x1 - x0 + 1, y1 - y0 + 1, category});
  }
  return im;
}

Recipe coco_shapes_recipe() {
  Recipe r;
  r.name = "coco-shapes";
  r.description = "COCO-like detection set: shapes with known boxes on photo-like backgrounds, "
                  "train2017/ + annotations/instances_train2017.json; tiny 32, small 512, full 118287 (ssd)";
  r.generate = [](const RecipeOptions& o) {
    const CocoShapesConfig cfg = coco_shapes_preset(o.size);
    fs::create_directories(o.out / "train2017");
    fs::create_directories(o.out / "annotations");
    std::vector<ShapesImage> meta(static_cast<std::size_t>(cfg.images));  // sizes and boxes, pixels dropped
    parallel_for(cfg.images, o.threads, o.show_progress, "coco-shapes", [&](long i) {
      ShapesImage im = render_shapes_image(item_seed(o.seed, 20, static_cast<std::uint64_t>(i)), cfg);
      core::write_file_atomic(o.out / "train2017" / fmt::format("{:012d}.jpg", i + 1),
                              encode_jpeg_rgb(im.rgb.data(), im.width, im.height, cfg.quality), kDatasetFileDurability);
      im.rgb.clear();
      im.rgb.shrink_to_fit();
      meta[static_cast<std::size_t>(i)] = std::move(im);
    });
    nlohmann::json doc;
    doc["info"] = {{"description", "mlbench coco-shapes (generated)"}, {"version", "1"}};
    doc["images"] = nlohmann::json::array();
    doc["annotations"] = nlohmann::json::array();
    doc["categories"] = nlohmann::json::array();
    static const char* kForms[4] = {"rectangle", "ellipse", "triangle", "diamond"};
    for (int c = 1; c <= cfg.categories; ++c) {
      doc["categories"].push_back(
          {{"id", c}, {"name", fmt::format("{}-{}", kForms[(c - 1) % 4], (c - 1) / 4)}, {"supercategory", kForms[(c - 1) % 4]}});
    }
    long ann_id = 1;
    for (std::size_t i = 0; i < meta.size(); ++i) {
      const long image_id = static_cast<long>(i) + 1;
      doc["images"].push_back({{"id", image_id},
                               {"file_name", fmt::format("{:012d}.jpg", image_id)},
                               {"width", meta[i].width},
                               {"height", meta[i].height}});
      for (const ShapeBox& b : meta[i].boxes) {
        doc["annotations"].push_back({{"id", ann_id++},
                                      {"image_id", image_id},
                                      {"category_id", b.category},
                                      {"bbox", {b.x, b.y, b.w, b.h}},
                                      {"area", b.w * b.h},
                                      {"iscrowd", 0}});
      }
    }
    core::write_file_atomic(o.out / "annotations" / "instances_train2017.json", doc.dump(), kDatasetFileDurability);
  };
  return r;
}

}  // namespace mlbench::datasets
