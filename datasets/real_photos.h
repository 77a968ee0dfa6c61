// real-photos: an ImageNet-like ImageFolder cut from real photographs (by
// default the nature photographs of Debian's mate-backgrounds package), so the
// loader is measured on the entropy, colour and texture of camera images and
// not only on fake-imagenet's synthetic ones. Each image is a random crop of
// one source photograph, downscaled (area filter) to ~350x340 on average and
// re-encoded at quality 92 (4:2:0). Deterministic for a seed and the same
// source files. docs/datasets.md says how the benchmark set is made.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mlbench::datasets {

// Where the recipe looks for source photographs unless --source says otherwise
// (Debian package mate-backgrounds, installed by scripts/bootstrap.sh).
inline constexpr const char* kDefaultPhotoSource = "/usr/share/backgrounds/mate/nature";

struct RealPhotosConfig {
  int classes = 10;
  int per_class = 200;     // train images per class
  int val_per_class = 20;  // val images per class (0: no val/)
  int quality = 92;        // JPEG quality of the re-encoded crops
};

// The preset of a size name ("tiny", "small", "full"); throws std::invalid_argument.
RealPhotosConfig real_photos_preset(const std::string& size);

// Output size and crop of one image, from its seed and its source's size.
struct PhotoCut {
  int out_w = 0, out_h = 0;        // the image written: 290-410 x 280-400 (15% portrait)
  int x = 0, y = 0, w = 0, h = 0;  // the crop of the source it is made from
};
// The crop has the output's aspect ratio (to the pixel) and is 1.5x to 6x the
// output's size (log-uniform, never larger than the source): every image is a
// downscale, as photographs in ImageNet are. A source smaller than 1.5x the
// output gives the largest crop that fits; one smaller than the output shrinks
// the output to it. Pure and deterministic.
PhotoCut plan_photo_cut(std::uint64_t seed, int source_w, int source_h);

// The *.jpg / *.jpeg files directly in `dir`, sorted by name. Throws
// std::runtime_error naming the folder (and the package that provides the
// default one) when it is missing or holds none.
std::vector<std::filesystem::path> list_source_photos(const std::filesystem::path& dir);

// Writes DIR/train/<class>/<class>_<i>.jpg (and DIR/val/...) and DIR/sources.txt
// (the source files used: name, bytes, size). Class c is cut from source
// c mod (number of sources).
void generate_real_photos(const std::filesystem::path& source_dir, const std::filesystem::path& out,
                          const RealPhotosConfig& config, std::uint64_t seed, int threads, bool show_progress);

}  // namespace mlbench::datasets
