// Tests of the recipe registry, dataset names, ensure/marker logic and fake-imagenet.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "datasets/fake_imagenet.h"
#include "datasets/recipe.h"
#include "pipeline/jpeg_decoder.h"

namespace fs = std::filesystem;
using namespace mlbench::datasets;

TEST(Recipes, NamesResolveWithSizeSuffix) {
  auto n = parse_dataset_name("fake-imagenet-small", all_recipes());
  ASSERT_TRUE(n);
  EXPECT_EQ(n->recipe->name, "fake-imagenet");
  EXPECT_EQ(n->size, "small");
  EXPECT_EQ(parse_dataset_name("fake-imagenet", all_recipes())->size, "full");
  EXPECT_FALSE(parse_dataset_name("fake-imagenet-huge", all_recipes()));
  EXPECT_FALSE(parse_dataset_name("nothing", all_recipes()));
}

TEST(Recipes, EnsureGeneratesOnceAndIsDeterministic) {
  const fs::path root = fs::temp_directory_path() / ("mlbench_datasets_test_" + std::to_string(::getpid()));
  fs::remove_all(root);
  RecipeOptions o;
  o.size = "tiny";
  o.show_progress = false;
  const Recipe& r = *find_recipe("fake-imagenet");
  ASSERT_TRUE(ensure_dataset(r, root / "a", o));
  EXPECT_TRUE(is_complete(root / "a"));
  EXPECT_FALSE(ensure_dataset(r, root / "a", o));  // marker: not regenerated
  ASSERT_TRUE(ensure_dataset(r, root / "b", o));
  const fs::path f = fs::path("train") / fake_class_name(3) / (fake_class_name(3) + "_7.jpg");
  ASSERT_TRUE(fs::exists(root / "a" / f));
  std::ifstream a(root / "a" / f, std::ios::binary), b(root / "b" / f, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}), std::string(std::istreambuf_iterator<char>(b), {}));
  // Foreign data without a marker is never overwritten.
  fs::create_directories(root / "c");
  std::ofstream(root / "c" / "mine.txt") << "x";
  EXPECT_THROW(ensure_dataset(r, root / "c", o), std::runtime_error);
  fs::remove_all(root);
}

TEST(FakeImagenet, PhotoLikeJpegsHaveImagenetSizes) {
  mlbench::pipeline::JpegDecoder dec;
  double total = 0;
  for (int i = 0; i < 6; ++i) {
    int w = 0, h = 0;
    photo_like_size(i, w, h);
    EXPECT_GE(std::min(w, h), 330);
    EXPECT_LE(std::max(w, h), 520);
    const auto rgb = synthesize_photo_like(i, w, h);
    const auto jpeg = encode_jpeg_rgb(rgb.data(), w, h, 90);
    total += jpeg.size();
    int dw = 0, dh = 0;
    dec.header(jpeg.data(), jpeg.size(), dw, dh);
    EXPECT_EQ(dw, w);
    EXPECT_EQ(dh, h);
  }
  // Photo-like, not noise: between 40 and 200 KB on average at quality 90.
  EXPECT_GT(total / 6, 40e3);
  EXPECT_LT(total / 6, 200e3);
}
