// The COCO reader (pipeline/formats/coco_annotations): COCO-style annotations
// (parse, errors, boxes mapped into a crop), the COCO image source, and the
// bsds500 and coco-shapes datagen recipes read back with that reader.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>


#include <nlohmann/json.hpp>

#include "pipeline/formats/coco_annotations.h"
#include "datasets/recipe.h"
#include "datasets/vision_sets.h"
#include "pipeline/source.h"
#include "tests/support/temp_dir.h"

namespace v = mlbench::pipeline;  // the COCO reader
namespace ds = mlbench::datasets;
namespace fs = std::filesystem;
using mlbench::testing_support::TempDir;

namespace {

nlohmann::json small_doc() {
  return nlohmann::json::parse(R"({
    "images": [{"id": 7, "file_name": "a.jpg", "width": 100, "height": 50},
               {"id": 9, "file_name": "b.jpg", "width": 20, "height": 20}],
    "annotations": [
      {"image_id": 7, "category_id": 18, "bbox": [10, 5, 20, 10], "iscrowd": 0},
      {"image_id": 7, "category_id": 3, "bbox": [60, 0, 40, 50]},
      {"image_id": 9, "category_id": 3, "bbox": [0, 0, 5, 5], "iscrowd": 1},
      {"image_id": 9, "category_id": 3, "bbox": [1, 1, 0, 4]}],
    "categories": [{"id": 18, "name": "dog"}, {"id": 3, "name": "car"}]
  })");
}

TEST(CocoAnnotations, ParsesImagesBoxesAndContiguousLabels) {
  auto a = v::parse_coco_annotations(small_doc(), "test.json");
  ASSERT_EQ(a.images.size(), 2u);
  EXPECT_EQ(a.category_ids, (std::vector<int>{3, 18}));  // sorted: car -> 1, dog -> 2
  EXPECT_EQ(a.category_names, (std::vector<std::string>{"car", "dog"}));
  ASSERT_EQ(a.images[0].boxes.size(), 2u);
  EXPECT_EQ(a.images[0].boxes[0].label, 2);
  EXPECT_DOUBLE_EQ(a.images[0].boxes[0].x, 10);
  EXPECT_DOUBLE_EQ(a.images[0].boxes[0].h, 10);
  EXPECT_EQ(a.images[0].boxes[1].label, 1);
  EXPECT_TRUE(a.images[1].boxes.empty());  // crowd and degenerate boxes left out
  EXPECT_EQ(a.annotations, 2);
}

TEST(CocoAnnotations, ErrorsNameTheProblem) {
  auto doc = small_doc();
  doc["annotations"][0]["image_id"] = 99;
  try {
    v::parse_coco_annotations(doc, "x.json");
    FAIL();
  } catch (const mlbench::pipeline::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown image id 99"), std::string::npos) << e.what();
  }
  auto no_cats = small_doc();
  no_cats.erase("categories");
  EXPECT_THROW(v::parse_coco_annotations(no_cats, "x.json"), mlbench::pipeline::DataError);
  auto bad_box = small_doc();
  bad_box["annotations"][0]["bbox"] = {1, 2, 3};
  EXPECT_THROW(v::parse_coco_annotations(bad_box, "x.json"), mlbench::pipeline::DataError);
  EXPECT_THROW(v::read_coco_annotations("/nonexistent/instances.json"), mlbench::pipeline::DataError);
}

TEST(CocoAnnotations, BoxesInCrop) {
  auto a = v::parse_coco_annotations(small_doc(), "t");
  // The centre 50x50 crop of the 100x50 image: x in [25, 75).
  auto boxes = v::boxes_in_crop(a.images[0], 25, 0, 50, 50);
  // Box 1 (10..30 x 5..15) keeps 5 of its 20 columns (25%: kept at the 0.25 limit);
  // box 2 (60..100) keeps 15 of 40 columns (37.5%).
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_FLOAT_EQ(boxes[0].l, 0.0f);
  EXPECT_FLOAT_EQ(boxes[0].r, 5.0f / 50.0f);
  EXPECT_FLOAT_EQ(boxes[0].t, 5.0f / 50.0f);
  EXPECT_FLOAT_EQ(boxes[0].b, 15.0f / 50.0f);
  EXPECT_FLOAT_EQ(boxes[1].l, 35.0f / 50.0f);
  EXPECT_FLOAT_EQ(boxes[1].r, 1.0f);
  // A stricter limit drops the first.
  EXPECT_EQ(v::boxes_in_crop(a.images[0], 25, 0, 50, 50, 0.3).size(), 1u);
  // A crop that misses every box.
  EXPECT_TRUE(v::boxes_in_crop(a.images[0], 32, 20, 20, 20).empty());
}

TEST(CocoImageSource, MissingImageIsNamed) {
  const TempDir tmp("coco_src");
  const fs::path dir = tmp.path();
  std::ofstream(dir / "a.jpg") << "abc";
  auto a = v::parse_coco_annotations(small_doc(), "t");
  try {
    v::CocoImageSource src(dir, a);
    FAIL();
  } catch (const mlbench::pipeline::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("b.jpg"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "b.jpg") << "defg";
  v::CocoImageSource src(dir, a);
  EXPECT_EQ(src.size(), 2u);
  EXPECT_EQ(src.label(1), 1);  // the image's index
  mlbench::pipeline::Bytes bytes;
  src.fetch(1, bytes);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "defg");
}

TEST(CocoShapes, BoxesLieInsideAndMatchThePaint) {
  ds::CocoShapesConfig cfg;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    auto im = ds::render_shapes_image(seed, cfg);
    EXPECT_GE(im.width, 360);
    EXPECT_LE(im.width, 640);
    ASSERT_EQ(im.rgb.size(), static_cast<std::size_t>(im.width) * im.height * 3);
    ASSERT_FALSE(im.boxes.empty());
    for (const auto& b : im.boxes) {
      EXPECT_GE(b.x, 0);
      EXPECT_GE(b.y, 0);
      EXPECT_LE(b.x + b.w, im.width);
      EXPECT_LE(b.y + b.h, im.height);
      EXPECT_GE(b.w, 12);
      EXPECT_GE(b.category, 1);
      EXPECT_LE(b.category, cfg.categories);
    }
  }
  // Deterministic for a seed.
  EXPECT_EQ(ds::render_shapes_image(3, cfg).rgb, ds::render_shapes_image(3, cfg).rgb);
}

TEST(VisionRecipes, CocoShapesTinyReadsBackWithTheReader) {
  const ds::Recipe* r = ds::find_recipe("coco-shapes");
  ASSERT_NE(r, nullptr);
  const TempDir tmp("coco_shapes");
  const fs::path dir = tmp.path() / "coco-shapes-tiny";
  ds::RecipeOptions o;
  o.size = "tiny";
  o.threads = 1;
  o.show_progress = false;
  ASSERT_TRUE(ds::ensure_dataset(*r, dir, o));
  auto a = v::read_coco_annotations(dir / "annotations" / "instances_train2017.json");
  EXPECT_EQ(a.images.size(), 32u);
  EXPECT_EQ(a.category_ids.size(), 80u);
  EXPECT_GE(a.annotations, 32);
  v::CocoImageSource src(dir / "train2017", a);  // every listed image exists
  EXPECT_EQ(src.size(), 32u);
}

TEST(VisionRecipes, Bsds500TinyIsAnImageFolder) {
  const ds::Recipe* r = ds::find_recipe("bsds500");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(ds::bsds500_preset("full").train, 200);
  EXPECT_EQ(ds::bsds500_preset("full").test, 200);
  EXPECT_THROW(ds::bsds500_preset("huge"), std::invalid_argument);
  const TempDir tmp("bsds");
  const fs::path dir = tmp.path() / "bsds500-tiny";
  ds::RecipeOptions o;
  o.size = "tiny";
  o.threads = 1;
  o.show_progress = false;
  ASSERT_TRUE(ds::ensure_dataset(*r, dir, o));
  mlbench::pipeline::ImageFolderReader reader(dir / "train");
  EXPECT_EQ(reader.size(), 16u);
  EXPECT_EQ(reader.classes(), (std::vector<std::string>{"images"}));
}

}  // namespace
