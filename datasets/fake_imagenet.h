// fake-imagenet: an ImageFolder of JPEGs that compress and decode like
// photographs (smooth gradients, hard-edged shapes, multi-scale texture, mild
// sensor noise), at ImageNet's typical sizes and quality. Also the building
// blocks tests use to make JPEGs of known size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace mlbench::datasets {

struct FakeImagenetConfig {
  int classes = 10;
  int per_class = 200;      // train images per class
  int val_per_class = 20;   // val images per class (0: no val/)
  int quality = 90;         // JPEG quality
};

// The preset of a size name ("tiny", "small", "full"); throws std::invalid_argument.
FakeImagenetConfig fake_imagenet_preset(const std::string& size);

// An RGB (interleaved, row-major) photo-like image, deterministic for a seed.
std::vector<std::uint8_t> synthesize_photo_like(std::uint64_t seed, int width, int height);
// Width and height of image `seed`: around ImageNet's (380-520 x 330-420, some portrait).
void photo_like_size(std::uint64_t seed, int& width, int& height);
// Baseline JPEG (4:2:0) of an RGB image with TurboJPEG; throws std::runtime_error.
std::vector<std::uint8_t> encode_jpeg_rgb(const std::uint8_t* rgb, int width, int height, int quality);

// Class folder name of class `c`: ImageNet-style "n%08d".
std::string fake_class_name(int c);

// One image of an ImageFolder being written: its split, class, index within the class, and
// the seed of the item (item_seed of the recipe's seed, the split's stream and the item's
// index within the split: train is stream 1, val stream 2).
struct ImageFolderItem {
  const char* split;
  int cls;
  int index;
  std::uint64_t seed;
};
// Creates OUT/train/<class>/ (and OUT/val/<class>/ when val_per_class > 0) and writes
// <class>_<index>.jpg for each image, the bytes made by `encode`, in parallel. The layout
// of every ImageFolder recipe (fake-imagenet, real-photos).
void write_image_folder(const std::filesystem::path& out, int classes, int per_class, int val_per_class,
                        std::uint64_t seed, int threads, bool show_progress, const std::string& label,
                        const std::function<std::vector<std::uint8_t>(const ImageFolderItem&)>& encode);

// Writes DIR/train/<class>/<class>_<i>.jpg (and DIR/val/...). Used by the recipe.
void generate_fake_imagenet(const std::string& out_dir, const FakeImagenetConfig& config, std::uint64_t seed,
                            int threads, bool show_progress);

}  // namespace mlbench::datasets
