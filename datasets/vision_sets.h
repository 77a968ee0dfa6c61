// The image datasets of reso and ssd: bsds500 (natural-image-like JPEGs at
// BSDS500's 481x321) and coco-shapes (COCO-like detection images: shapes with
// known boxes on photo-like backgrounds, with COCO-style JSON annotations).
// The pure parts (presets, rendering) are here so tests check them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlbench::datasets {

struct Bsds500Config {
  int train = 200, val = 100, test = 200;  // BSDS500's split sizes
  int quality = 90;
};
Bsds500Config bsds500_preset(const std::string& size);  // throws std::invalid_argument

struct ShapeBox {
  int x = 0, y = 0, w = 0, h = 0;  // pixels: the shape's exact bounding box
  int category = 1;                // COCO-style category id, 1..categories
};
struct ShapesImage {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgb;  // interleaved
  std::vector<ShapeBox> boxes;
};

struct CocoShapesConfig {
  int images = 512;       // train2017 images
  int categories = 80;    // COCO's count
  int max_objects = 6;    // 1..max_objects shapes per image
  int quality = 90;
};
CocoShapesConfig coco_shapes_preset(const std::string& size);  // throws std::invalid_argument

// One image (COCO-like size, 480-640 x 360-480, some portrait) with 1..max
// shapes (rectangle, ellipse, triangle or diamond by category, one colour per
// category) on a photo-like background; deterministic for `seed`. Every box
// lies inside the image and has at least 12x12 pixels.
ShapesImage render_shapes_image(std::uint64_t seed, const CocoShapesConfig& config);

}  // namespace mlbench::datasets
