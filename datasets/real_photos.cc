// real-photos: crops of real photographs re-encoded as an ImageNet-like set
// (datasets/real_photos.h). The sources are decoded once (TurboJPEG), every
// image is cut and downscaled with OpenCV's area filter (no aliasing: a
// bilinear downscale by 3x would add false fine texture, and bigger files) and
// encoded with the same TurboJPEG settings as fake-imagenet.
#include "datasets/real_photos.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/cli.h"
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "core/rng.h"
#include "datasets/fake_imagenet.h"
#include "datasets/recipe.h"

namespace mlbench::datasets {

namespace fs = std::filesystem;

namespace {

struct SourcePhoto {
  fs::path path;
  std::uintmax_t bytes = 0;
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgb;
};

SourcePhoto decode_source(const fs::path& path) {
  SourcePhoto s;
  s.path = path;
  std::ifstream in(path, std::ios::binary);
  const std::vector<unsigned char> jpeg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw std::runtime_error("cannot read " + path.string());
  s.bytes = jpeg.size();
  std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
  if (!handle) throw std::runtime_error("tjInitDecompress failed");
  int subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), jpeg.data(), jpeg.size(), &s.width, &s.height, &subsamp, &colorspace) != 0) {
    throw std::runtime_error(path.string() + ": not a JPEG: " + tjGetErrorStr2(handle.get()));
  }
  s.rgb.resize(static_cast<std::size_t>(s.width) * s.height * 3);
  if (tjDecompress2(handle.get(), jpeg.data(), jpeg.size(), s.rgb.data(), s.width, 0, s.height, TJPF_RGB,
                    TJFLAG_ACCURATEDCT) != 0) {
    throw std::runtime_error(path.string() + ": corrupt JPEG: " + tjGetErrorStr2(handle.get()));
  }
  return s;
}

}  // namespace

RealPhotosConfig real_photos_preset(const std::string& size) {
  return by_size<RealPhotosConfig>(size, {.classes = 4, .per_class = 8, .val_per_class = 2, .quality = 92},
                                   {.classes = 10, .per_class = 200, .val_per_class = 20, .quality = 92},
                                   {.classes = 100, .per_class = 100, .val_per_class = 10, .quality = 92});
}

PhotoCut plan_photo_cut(std::uint64_t seed, int source_w, int source_h) {
  core::Rng rng(seed);
  PhotoCut c;
  c.out_w = rng.integer(290, 410);
  c.out_h = rng.integer(280, 400);
  if (rng.uniform() < 0.15) std::swap(c.out_w, c.out_h);  // some portrait shots
  // A source smaller than the output: shrink the output, keeping its aspect ratio.
  const double fit = std::min({1.0, static_cast<double>(source_w) / c.out_w, static_cast<double>(source_h) / c.out_h});
  c.out_w = std::max(1, static_cast<int>(c.out_w * fit));
  c.out_h = std::max(1, static_cast<int>(c.out_h * fit));
  const double k_max = std::min(static_cast<double>(source_w) / c.out_w, static_cast<double>(source_h) / c.out_h);
  const double k_lo = std::min(1.5, k_max), k_hi = std::min(6.0, k_max);
  const double k = std::exp(rng.uniform(std::log(k_lo), std::log(k_hi)));
  c.w = std::clamp(static_cast<int>(std::lround(c.out_w * k)), c.out_w, source_w);
  c.h = std::clamp(static_cast<int>(std::lround(c.out_h * k)), c.out_h, source_h);
  c.x = rng.integer(0, source_w - c.w);
  c.y = rng.integer(0, source_h - c.h);
  return c;
}

std::vector<fs::path> list_source_photos(const fs::path& dir) {
  const std::string hint = dir == fs::path(kDefaultPhotoSource)
                               ? " (Debian package mate-backgrounds: apt-get install mate-backgrounds)"
                               : " (--source DIR: a folder of JPEG photographs)";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error("real-photos: no folder " + dir.string() + hint);
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg")) out.push_back(e.path());
  }
  if (out.empty()) throw std::runtime_error("real-photos: no JPEG photographs in " + dir.string() + hint);
  std::sort(out.begin(), out.end());
  return out;
}

void generate_real_photos(const fs::path& source_dir, const fs::path& out, const RealPhotosConfig& config,
                          std::uint64_t seed, int threads, bool show_progress) {
  if (config.classes < 1 || config.per_class < 1 || config.val_per_class < 0) {
    throw std::invalid_argument("real-photos needs --classes >= 1 and --per-class >= 1");
  }
  const std::vector<fs::path> files = list_source_photos(source_dir);
  // Only the sources some class uses are decoded (a decoded 2560x1600 photo is 12 MB).
  const std::size_t used = std::min(files.size(), static_cast<std::size_t>(config.classes));
  std::vector<SourcePhoto> sources(used);
  parallel_for(static_cast<long>(used), threads, false, "sources", [&](long i) {
    sources[static_cast<std::size_t>(i)] = decode_source(files[static_cast<std::size_t>(i)]);
  });

  write_image_folder(out, config.classes, config.per_class, config.val_per_class, seed, threads, show_progress,
                     "real-photos", [&](const ImageFolderItem& item) {
                       const SourcePhoto& src = sources[static_cast<std::size_t>(item.cls) % used];
                       const PhotoCut cut = plan_photo_cut(item.seed, src.width, src.height);
                       const cv::Mat image(src.height, src.width, CV_8UC3,
                                           const_cast<std::uint8_t*>(src.rgb.data()));
                       cv::Mat small;
                       cv::resize(image(cv::Rect(cut.x, cut.y, cut.w, cut.h)), small, cv::Size(cut.out_w, cut.out_h),
                                  0, 0, cv::INTER_AREA);
                       return encode_jpeg_rgb(small.data, cut.out_w, cut.out_h, config.quality);
                     });

  std::string list = "# real-photos sources: class c is cut from source c mod " + std::to_string(used) + "\n";
  for (const SourcePhoto& s : sources) {
    list += fmt::format("{}\t{} bytes\t{}x{}\n", s.path.string(), s.bytes, s.width, s.height);
  }
  core::write_file_atomic(out / "sources.txt", list, kDatasetFileDurability);
}

Recipe real_photos_recipe() {
  // Flag values of `mlbench-datagen real-photos`; -1 keeps the preset's value.
  struct Overrides {
    std::string source = kDefaultPhotoSource;
    int classes = -1, per_class = -1, val_per_class = -1, quality = -1;
  };
  auto ov = std::make_shared<Overrides>();
  Recipe r;
  r.name = "real-photos";
  r.description =
      "ImageFolder of crops of real photographs (mate-backgrounds), ~350x340 at quality 92 (train/ and val/); "
      "tiny 4x8, small 10x200, full 100x100 classes x images";
  r.add_options = [ov](CLI::App& app) {
    app.add_option("--source", ov->source, "Folder of source JPEG photographs")->capture_default_str();
    app.add_option("--classes", ov->classes, "Number of classes (default: the --size preset)")
        ->check(CLI::PositiveNumber);
    app.add_option("--per-class", ov->per_class, "Train images per class (default: the --size preset)")
        ->check(CLI::PositiveNumber);
    app.add_option("--val-per-class", ov->val_per_class, "Val images per class, 0 for none (default: preset)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--quality", ov->quality, "JPEG quality (default 92)")->check(mlbench::core::integer_in(1, 100));
  };
  r.generate = [ov](const RecipeOptions& o) {
    RealPhotosConfig cfg = real_photos_preset(o.size);
    if (ov->classes > 0) cfg.classes = ov->classes;
    if (ov->per_class > 0) cfg.per_class = ov->per_class;
    if (ov->val_per_class >= 0) cfg.val_per_class = ov->val_per_class;
    if (ov->quality > 0) cfg.quality = ov->quality;
    generate_real_photos(ov->source, o.out, cfg, o.seed, o.threads, o.show_progress);
  };
  return r;
}

}  // namespace mlbench::datasets
