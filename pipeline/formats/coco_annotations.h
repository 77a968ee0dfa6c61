// COCO-style detection annotations (instances_*.json: images, annotations
// with bbox [x, y, width, height] in pixels, categories), read into a plain
// table, the boxes of one image mapped into a crop of it, and an ItemSource
// over the images for the instrumented pipeline. Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pipeline/source.h"

namespace mlbench::pipeline {

struct CocoBox {
  double x = 0, y = 0, w = 0, h = 0;  // pixels, top-left corner and size (COCO's bbox)
  int label = 0;                      // contiguous label 1..categories (0 is background)
};

struct CocoImage {
  std::string file_name;  // relative to the image folder
  int width = 0, height = 0;
  std::vector<CocoBox> boxes;  // crowd annotations left out, as the SSD reference
};

struct CocoAnnotations {
  std::vector<CocoImage> images;          // in the file's order
  std::vector<int> category_ids;          // sorted; label i+1 is category_ids[i]
  std::vector<std::string> category_names;
  long annotations = 0;                   // boxes kept
};

// Parses a COCO-style document. Throws DataError naming `where` and
// the first problem (missing field, bbox not 4 numbers, unknown image or category id).
CocoAnnotations parse_coco_annotations(const nlohmann::json& doc, const std::string& where);
// Reads and parses the file; throws DataError for a missing or malformed file.
CocoAnnotations read_coco_annotations(const std::filesystem::path& file);

// A box relative to a crop, corners in [0, 1].
struct RelBox {
  float l = 0, t = 0, r = 0, b = 0;
  int label = 0;
};
// The image's boxes inside the crop (x, y, w, h in the image's pixels), clipped
// to it and in its relative coordinates; boxes left with under `min_keep` of
// their area inside the crop are dropped.
std::vector<RelBox> boxes_in_crop(const CocoImage& image, int crop_x, int crop_y, int crop_w, int crop_h,
                                  double min_keep = 0.25);

// The images of an annotation file as a pipeline source: JPEG bytes read with
// pread from `image_dir`/file_name. label(i) is the image's index i, so the
// consumer finds the image's boxes in annotations().images[i].
class CocoImageSource : public ItemSource {
 public:
  // Throws DataError when the folder or an image listed is missing
  // (checked up front, naming the first missing file).
  CocoImageSource(std::filesystem::path image_dir, CocoAnnotations annotations);
  std::size_t size() const override { return annotations_.images.size(); }
  std::int64_t label(std::size_t index) const override { return static_cast<std::int64_t>(index); }
  void fetch(std::size_t index, Bytes& out) const override;
  Encoding encoding() const override { return Encoding::Jpeg; }
  std::string describe(std::size_t index) const override;
  const CocoAnnotations& annotations() const { return annotations_; }

 private:
  std::filesystem::path dir_;
  CocoAnnotations annotations_;
};

}  // namespace mlbench::pipeline
