// fake-imagenet: photo-like JPEG synthesis and the recipe.
//
// Why not random noise (as the Mila suite's fake ImageNet): noise JPEGs are
// 3-5x larger than photos at the same quality and their entropy decoding
// dominates, so a loader tuned on them is tuned for the wrong thing. These
// images mix what photos have: smooth illumination, object edges, texture at
// several scales and a little noise; the amount of fine texture varies per
// image so file sizes spread as ImageNet's do (mean ~110 KB at quality 90).
#include "datasets/fake_imagenet.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/cli.h"
#include "core/rng.h"
#include "datasets/recipe.h"

namespace mlbench::datasets {

namespace {

using core::Rng;

// A random grid of `gw` x `gh` values bilinearly upsampled to width x height and
// added (times `amp`) to `plane`.
void add_value_noise(std::vector<float>& plane, int width, int height, double cell, double amp, Rng& rng) {
  const int gw = static_cast<int>(width / cell) + 2;
  const int gh = static_cast<int>(height / cell) + 2;
  std::vector<float> grid(static_cast<std::size_t>(gw) * gh);
  for (float& g : grid) g = static_cast<float>(rng.uniform(-1.0, 1.0) * amp);
  const float inv = static_cast<float>(1.0 / cell);
  for (int y = 0; y < height; ++y) {
    const float fy = y * inv;
    const int y0 = static_cast<int>(fy);
    const float ty = fy - y0;
    const float* r0 = &grid[static_cast<std::size_t>(y0) * gw];
    const float* r1 = r0 + gw;
    float* out = &plane[static_cast<std::size_t>(y) * width];
    for (int x = 0; x < width; ++x) {
      const float fx = x * inv;
      const int x0 = static_cast<int>(fx);
      const float tx = fx - x0;
      const float top = r0[x0] + (r0[x0 + 1] - r0[x0]) * tx;
      const float bot = r1[x0] + (r1[x0 + 1] - r1[x0]) * tx;
      out[x] += top + (bot - top) * ty;
    }
  }
}

struct Color {
  float r, g, b;
};

Color random_color(Rng& rng, const Color& base, double spread) {
  auto c = [&](float v) { return static_cast<float>(std::clamp(v + rng.uniform(-spread, spread), 0.0, 255.0)); };
  return {c(base.r), c(base.g), c(base.b)};
}

std::uint8_t to_u8(float v) { return static_cast<std::uint8_t>(std::clamp(v, 0.0f, 255.0f) + 0.5f > 255.0f ? 255.0f : std::clamp(v, 0.0f, 255.0f) + 0.5f); }

}  // namespace

std::string fake_class_name(int c) { return fmt::format("n{:08d}", c); }

FakeImagenetConfig fake_imagenet_preset(const std::string& size) {
  return by_size<FakeImagenetConfig>(size, {.classes = 4, .per_class = 8, .val_per_class = 2, .quality = 90},
                                     {.classes = 10, .per_class = 200, .val_per_class = 20, .quality = 90},
                                     {.classes = 1000, .per_class = 100, .val_per_class = 10, .quality = 90});
}

void photo_like_size(std::uint64_t seed, int& width, int& height) {
  Rng rng(seed ^ 0x5151);
  width = rng.integer(380, 520);
  height = rng.integer(330, 420);
  if (rng.uniform() < 0.2) std::swap(width, height);  // some portrait shots
}

std::vector<std::uint8_t> synthesize_photo_like(std::uint64_t seed, int width, int height) {
  Rng rng(seed);
  const std::size_t n = static_cast<std::size_t>(width) * height;
  std::vector<float> plane[3] = {std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};

  // 1. Illumination: a coarse colour grid, smoothly interpolated.
  const Color base{static_cast<float>(rng.uniform(70, 185)), static_cast<float>(rng.uniform(70, 185)),
                   static_cast<float>(rng.uniform(70, 185))};
  for (auto& p : plane) std::fill(p.begin(), p.end(), 0.0f);
  {
    Rng grid_rng(rng.next());
    const double cell = std::max(width, height) / 3.0;
    for (int c = 0; c < 3; ++c) add_value_noise(plane[c], width, height, cell, 35.0, grid_rng);
    for (int c = 0; c < 3; ++c) {
      const float b = c == 0 ? base.r : c == 1 ? base.g : base.b;
      for (float& v : plane[c]) v += b;
    }
  }

  // 2. Objects: hard-edged ellipses and rotated rectangles with their own shading.
  const int shapes = rng.integer(4, 12);
  for (int s = 0; s < shapes; ++s) {
    const Color col = random_color(rng, base, 70.0);
    const double cx = rng.uniform(0, width), cy = rng.uniform(0, height);
    const double rx = rng.uniform(0.05, 0.35) * width, ry = rng.uniform(0.05, 0.35) * height;
    const double angle = rng.uniform(0, M_PI);
    const double ca = std::cos(angle), sa = std::sin(angle);
    const bool ellipse = rng.uniform() < 0.6;
    const double gx = rng.uniform(-0.25, 0.25), gy = rng.uniform(-0.25, 0.25);  // shading slope
    const double reach = std::max(rx, ry);
    const int x0 = std::max(0, static_cast<int>(cx - reach)), x1 = std::min(width - 1, static_cast<int>(cx + reach));
    const int y0 = std::max(0, static_cast<int>(cy - reach)), y1 = std::min(height - 1, static_cast<int>(cy + reach));
    for (int y = y0; y <= y1; ++y) {
      for (int x = x0; x <= x1; ++x) {
        const double dx = x - cx, dy = y - cy;
        const double u = (dx * ca + dy * sa) / rx, v = (-dx * sa + dy * ca) / ry;
        const bool inside = ellipse ? (u * u + v * v <= 1.0) : (std::abs(u) <= 1.0 && std::abs(v) <= 1.0);
        if (!inside) continue;
        const float shade = static_cast<float>(gx * dx + gy * dy);
        const std::size_t i = static_cast<std::size_t>(y) * width + x;
        plane[0][i] = col.r + shade;
        plane[1][i] = col.g + shade;
        plane[2][i] = col.b + shade;
      }
    }
  }

  // 3. Texture at three scales, mostly in luminance; how busy varies per image.
  const double busy = rng.uniform(1.0, 2.6);
  std::vector<float> luma(n, 0.0f);
  add_value_noise(luma, width, height, rng.uniform(14, 30), 14.0 * busy, rng);
  add_value_noise(luma, width, height, rng.uniform(4, 7), 24.0 * busy, rng);
  add_value_noise(luma, width, height, rng.uniform(1.5, 2.5), 40.0 * busy, rng);
  std::vector<float> chroma(n, 0.0f);
  add_value_noise(chroma, width, height, rng.uniform(3, 8), 10.0 * busy, rng);

  // 4. Sensor noise, then quantise.
  std::vector<std::uint8_t> rgb(n * 3);
  Rng noise(rng.next());
  const float sigma = static_cast<float>(rng.uniform(8.0, 14.0));
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t bits = noise.next();
    // Sum of four bytes: a cheap near-Gaussian with sd ~ 1 after scaling.
    const float g = (static_cast<float>((bits & 0xff) + ((bits >> 8) & 0xff) + ((bits >> 16) & 0xff) +
                                        ((bits >> 24) & 0xff)) -
                     510.0f) /
                    147.8f;
    const float l = luma[i] + g * sigma;
    const float r = plane[0][i] + l + chroma[i];
    const float gr = plane[1][i] + l;
    const float b = plane[2][i] + l - chroma[i];
    rgb[3 * i + 0] = to_u8(r);
    rgb[3 * i + 1] = to_u8(gr);
    rgb[3 * i + 2] = to_u8(b);
  }
  return rgb;
}

std::vector<std::uint8_t> encode_jpeg_rgb(const std::uint8_t* rgb, int width, int height, int quality) {
  std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitCompress(), tjDestroy);
  if (!handle) throw std::runtime_error("tjInitCompress failed");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (tjCompress2(handle.get(), rgb, width, 0, height, TJPF_RGB, &buf, &size, TJSAMP_420, quality,
                  TJFLAG_ACCURATEDCT) != 0) {
    std::string msg = tjGetErrorStr2(handle.get());
    tjFree(buf);
    throw std::runtime_error("JPEG encoding failed: " + msg);
  }
  std::vector<std::uint8_t> out(buf, buf + size);
  tjFree(buf);
  return out;
}

void generate_fake_imagenet(const std::string& out_dir, const FakeImagenetConfig& config, std::uint64_t seed,
                            int threads, bool show_progress) {
  if (config.classes < 1 || config.per_class < 1 || config.val_per_class < 0) {
    throw std::invalid_argument("fake-imagenet needs --classes >= 1 and --per-class >= 1");
  }
  write_image_folder(out_dir, config.classes, config.per_class, config.val_per_class, seed, threads, show_progress,
                     "fake-imagenet", [&](const ImageFolderItem& item) {
                       int w = 0, h = 0;
                       photo_like_size(item.seed, w, h);
                       const auto rgb = synthesize_photo_like(item.seed, w, h);
                       return encode_jpeg_rgb(rgb.data(), w, h, config.quality);
                     });
}

void write_image_folder(const std::filesystem::path& out, int classes, int per_class, int val_per_class,
                        std::uint64_t seed, int threads, bool show_progress, const std::string& label,
                        const std::function<std::vector<std::uint8_t>(const ImageFolderItem&)>& encode) {
  struct Split {
    const char* name;
    int per_class;
    std::uint64_t stream;
  };
  const Split splits[] = {{"train", per_class, 1}, {"val", val_per_class, 2}};
  long total = 0;
  for (const Split& s : splits) {
    if (s.per_class == 0) continue;
    for (int c = 0; c < classes; ++c) std::filesystem::create_directories(out / s.name / fake_class_name(c));
    total += static_cast<long>(s.per_class) * classes;
  }
  const long train_total = static_cast<long>(per_class) * classes;
  parallel_for(total, threads, show_progress, label, [&](long i) {
    const Split& s = i < train_total ? splits[0] : splits[1];
    const long j = i < train_total ? i : i - train_total;
    const ImageFolderItem item{s.name, static_cast<int>(j / s.per_class), static_cast<int>(j % s.per_class),
                               item_seed(seed, s.stream, static_cast<std::uint64_t>(j))};
    const auto jpeg = encode(item);
    const std::string name = fmt::format("{}_{}.jpg", fake_class_name(item.cls), item.index);
    core::write_file_atomic(out / s.name / fake_class_name(item.cls) / name, jpeg, kDatasetFileDurability);
  });
}

Recipe fake_imagenet_recipe() {
  // Flag values of `mlbench-datagen fake-imagenet`; -1 keeps the preset's value.
  struct Overrides {
    int classes = -1, per_class = -1, val_per_class = -1, quality = -1;
  };
  auto ov = std::make_shared<Overrides>();
  Recipe r;
  r.name = "fake-imagenet";
  r.description =
      "ImageFolder of photo-like JPEGs at ImageNet sizes (train/ and val/); "
      "tiny 4x8, small 10x200, full 1000x100 classes x images";
  r.add_options = [ov](CLI::App& app) {
    app.add_option("--classes", ov->classes, "Number of classes (default: the --size preset)")
        ->check(core::integer_at_least(1));
    app.add_option("--per-class", ov->per_class, "Train images per class (default: the --size preset)")
        ->check(core::integer_at_least(1));
    app.add_option("--val-per-class", ov->val_per_class, "Val images per class, 0 for none (default: preset)")
        ->check(core::integer_at_least(0));
    app.add_option("--quality", ov->quality, "JPEG quality (default 90)")->check(core::integer_in(1, 100));
  };
  r.generate = [ov](const RecipeOptions& o) {
    FakeImagenetConfig cfg = fake_imagenet_preset(o.size);
    if (ov->classes > 0) cfg.classes = ov->classes;
    if (ov->per_class > 0) cfg.per_class = ov->per_class;
    if (ov->val_per_class >= 0) cfg.val_per_class = ov->val_per_class;
    if (ov->quality > 0) cfg.quality = ov->quality;
    generate_fake_imagenet(o.out.string(), cfg, o.seed, o.threads, o.show_progress);
  };
  return r;
}

}  // namespace mlbench::datasets
