// mnist: digit-like 28x28 grey images in MNIST's own IDX files
// (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-...), so the vae
// benchmark reads them with the same reader as the real files. Each image is a
// digit drawn as thick anti-aliased strokes (a seven-segment skeleton with
// diagonals) under a random affine jitter, centred in the 20x20 box as MNIST.
// Sizes: tiny 256/64, small 6000/1000, full 60000/10000 (MNIST's counts).
#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <utility>

#include "datasets/recipe.h"

namespace mlbench::datasets {

namespace {

struct Segment {
  float x0, y0, x1, y1;
};

// Strokes of each digit in a unit box (x right, y down).
const std::vector<Segment>& digit_strokes(int d) {
  static const std::array<std::vector<Segment>, 10> kDigits{{
      {{0.2f, 0, 0.8f, 0}, {0.8f, 0, 0.8f, 1}, {0.8f, 1, 0.2f, 1}, {0.2f, 1, 0.2f, 0}},
      {{0.35f, 0.15f, 0.55f, 0}, {0.55f, 0, 0.55f, 1}},
      {{0.2f, 0.1f, 0.5f, 0}, {0.5f, 0, 0.8f, 0.2f}, {0.8f, 0.2f, 0.2f, 1}, {0.2f, 1, 0.85f, 1}},
      {{0.2f, 0, 0.8f, 0}, {0.8f, 0, 0.45f, 0.45f}, {0.45f, 0.45f, 0.8f, 0.7f}, {0.8f, 0.7f, 0.5f, 1}, {0.5f, 1, 0.2f, 0.9f}},
      {{0.65f, 1, 0.65f, 0}, {0.65f, 0, 0.15f, 0.7f}, {0.15f, 0.7f, 0.85f, 0.7f}},
      {{0.8f, 0, 0.25f, 0}, {0.25f, 0, 0.2f, 0.45f}, {0.2f, 0.45f, 0.75f, 0.55f}, {0.75f, 0.55f, 0.7f, 1}, {0.7f, 1, 0.2f, 0.95f}},
      {{0.7f, 0, 0.25f, 0.5f}, {0.25f, 0.5f, 0.25f, 1}, {0.25f, 1, 0.8f, 1}, {0.8f, 1, 0.8f, 0.55f}, {0.8f, 0.55f, 0.25f, 0.55f}},
      {{0.15f, 0, 0.85f, 0}, {0.85f, 0, 0.4f, 1}},
      {{0.25f, 0, 0.75f, 0}, {0.75f, 0, 0.25f, 1}, {0.25f, 1, 0.75f, 1}, {0.75f, 1, 0.25f, 0}, {0.25f, 0, 0.25f, 0.05f}},
      {{0.8f, 0.45f, 0.2f, 0.45f}, {0.2f, 0.45f, 0.2f, 0}, {0.2f, 0, 0.8f, 0}, {0.8f, 0, 0.8f, 1}, {0.8f, 1, 0.3f, 1}},
  }};
  return kDigits[static_cast<std::size_t>(d)];
}

float segment_distance(float px, float py, const Segment& s) {
  const float dx = s.x1 - s.x0, dy = s.y1 - s.y0;
  const float len2 = dx * dx + dy * dy;
  float t = len2 > 0 ? ((px - s.x0) * dx + (py - s.y0) * dy) / len2 : 0.0f;
  t = std::clamp(t, 0.0f, 1.0f);
  const float ex = px - (s.x0 + t * dx), ey = py - (s.y0 + t * dy);
  return std::sqrt(ex * ex + ey * ey);
}

}  // namespace

// One 28x28 image of digit `d`, deterministic for `seed`.
std::array<std::uint8_t, 784> render_digit(int d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float angle = 0.2f * u(rng), shear = 0.25f * u(rng);
  const float sx = 16.0f + 3.0f * u(rng), sy = 20.0f + 1.5f * u(rng);
  const float cx = 14.0f + 1.5f * u(rng), cy = 14.0f + 1.5f * u(rng);
  const float thickness = 1.3f + 0.6f * (u(rng) + 1.0f) * 0.5f;
  const float ca = std::cos(angle), sa = std::sin(angle);
  // Pixel -> unit box: undo translation, rotation, shear and scale.
  std::array<std::uint8_t, 784> img{};
  for (int y = 0; y < 28; ++y) {
    for (int x = 0; x < 28; ++x) {
      const float rx = ca * (x + 0.5f - cx) + sa * (y + 0.5f - cy);
      const float ry = -sa * (x + 0.5f - cx) + ca * (y + 0.5f - cy);
      const float bx = (rx - shear * ry) / sx + 0.5f, by = ry / sy + 0.5f;
      float dist = 1e9f;
      for (const auto& s : digit_strokes(d)) dist = std::min(dist, segment_distance(bx, by, s));
      // Distance in pixels (the box is ~sx wide); a soft edge one pixel wide.
      const float v = std::clamp(thickness - dist * sx + 0.5f, 0.0f, 1.0f);
      img[static_cast<std::size_t>(y * 28 + x)] = static_cast<std::uint8_t>(std::lround(v * 255.0f));
    }
  }
  return img;
}

namespace {

std::string idx_header(std::uint8_t ndims, std::initializer_list<std::uint32_t> dims) {
  std::string h{'\0', '\0', '\x08', static_cast<char>(ndims)};
  for (auto d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) h.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  return h;
}

void write_split(const std::filesystem::path& dir, const std::string& split, long count, std::uint64_t seed,
                 std::uint64_t stream, int threads, bool progress) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(count) * 784), labels(static_cast<std::size_t>(count));
  parallel_for(count, threads, progress, "mnist " + split, [&](long i) {
    const std::uint64_t s = item_seed(seed, stream, static_cast<std::uint64_t>(i));
    const int digit = static_cast<int>(s % 10);
    labels[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(digit);
    const auto img = render_digit(digit, s);
    std::copy(img.begin(), img.end(), pixels.begin() + i * 784);
  });
  const auto n = static_cast<std::uint32_t>(count);
  auto write = [](const std::filesystem::path& f, const std::string& header, const std::vector<std::uint8_t>& data) {
    core::AtomicFile out(f);
    out.write(header);
    out.write(data);
    out.commit(kDatasetFileDurability);
  };
  write(dir / (split + "-images-idx3-ubyte"), idx_header(3, {n, 28, 28}), pixels);
  write(dir / (split + "-labels-idx1-ubyte"), idx_header(1, {n}), labels);
}

}  // namespace

Recipe mnist_recipe() {
  Recipe r;
  r.name = "mnist";
  r.description =
      "digit-like 28x28 images in MNIST's IDX files (train-*, t10k-*); "
      "tiny 256/64, small 6000/1000, full 60000/10000 images";
  r.generate = [](const RecipeOptions& o) {
    const auto [train, test] = by_size<std::pair<long, long>>(o.size, {256, 64}, {6000, 1000}, {60000, 10000});
    write_split(o.out, "train", train, o.seed, 1, o.threads, o.show_progress);
    write_split(o.out, "t10k", test, o.seed, 2, o.threads, o.show_progress);
  };
  return r;
}

}  // namespace mlbench::datasets
