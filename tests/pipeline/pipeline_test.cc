// Unit tests of the pipeline: sampler, cache policy, crop geometry, flip and
// normalisation, collate layout, DCT-scaled decode, bad-data handling.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <turbojpeg.h>

#include "datasets/fake_imagenet.h"
#include "pipeline/item_cache.h"
#include "pipeline/jpeg_decoder.h"
#include "pipeline/loader.h"
#include "pipeline/sampler.h"
#include "pipeline/source.h"
#include "pipeline/transforms.h"
#include "tests/support/jpeg_folder.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace mlbench::pipeline;
using mlbench::testing_support::TempDir;

TEST(Sampler, SequentialIsIdentity) {
  Sampler s(5, false, 1);
  EXPECT_EQ(s.epoch_indices(0), (std::vector<std::size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(s.epoch_indices(3), s.epoch_indices(0));
}

TEST(Sampler, ShuffleIsAPermutationNewEachEpochAndDeterministic) {
  Sampler s(100, true, 42);
  auto e0 = s.epoch_indices(0), e1 = s.epoch_indices(1);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, Sampler(100, true, 42).epoch_indices(0));
  EXPECT_NE(e0, Sampler(100, true, 43).epoch_indices(0));
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  for (std::size_t i = 0; i < 100; ++i) EXPECT_EQ(e0[i], i);
  EXPECT_EQ(e0, e1);
}

TEST(Sampler, ShardsCoverEveryIndexOnce) {
  for (int shards : {1, 3, 4, 7}) {
    std::multiset<std::size_t> all;
    std::size_t total = 0;
    for (int id = 0; id < shards; ++id) {
      Sampler s(50, true, 9, shards, id);
      auto idx = s.epoch_indices(2);
      EXPECT_EQ(idx.size(), s.shard_size());
      total += idx.size();
      all.insert(idx.begin(), idx.end());
    }
    EXPECT_EQ(total, 50u);
    for (std::size_t i = 0; i < 50; ++i) EXPECT_EQ(all.count(i), 1u) << shards << " shards, index " << i;
  }
  EXPECT_THROW(Sampler(10, false, 0, 2, 2), std::invalid_argument);
}

TEST(ItemCache, ParsesCapacities) {
  EXPECT_EQ(parse_cache_size("1000").unit, CacheCapacity::Unit::Items);
  EXPECT_DOUBLE_EQ(parse_cache_size("40%").value, 0.4);
  EXPECT_DOUBLE_EQ(parse_cache_size("2GiB").value, 2147483648.0);
  EXPECT_DOUBLE_EQ(parse_cache_size("500MB").value, 500e6);
  EXPECT_FALSE(parse_cache_size("0").enabled());
  EXPECT_THROW(parse_cache_size("lots"), std::invalid_argument);
  EXPECT_THROW(parse_cache_size("120%"), std::invalid_argument);
  EXPECT_THROW(parse_cache_size("1.5"), std::invalid_argument);
}

TEST(ItemCache, NeverEvictingCacheGetsExactlyCapacityHitsPerEpoch) {
  const std::size_t n = 200;
  for (double x : {0.0, 0.25, 0.4, 1.0}) {
    CacheCapacity cap{CacheCapacity::Unit::Fraction, x};
    ItemCache cache = ItemCache::from_capacity(cap, n);
    Sampler s(n, true, 5);
    for (long epoch = 0; epoch < 4; ++epoch) {
      const auto h0 = cache.hits();
      for (std::size_t i : s.epoch_indices(epoch)) {
        if (!cache.get(i)) cache.put(i, std::make_shared<Bytes>(10, 1));
      }
      const auto hits = cache.hits() - h0;
      EXPECT_EQ(hits, epoch == 0 ? 0u : static_cast<std::uint64_t>(x * n)) << "x=" << x << " epoch " << epoch;
    }
  }
}

TEST(ItemCache, ByteCapacityIsNeverExceeded) {
  ItemCache cache(UINT64_MAX, 25);
  EXPECT_TRUE(cache.put(1, std::make_shared<Bytes>(10)));
  EXPECT_TRUE(cache.put(2, std::make_shared<Bytes>(10)));
  EXPECT_FALSE(cache.put(3, std::make_shared<Bytes>(10)));  // would exceed
  EXPECT_TRUE(cache.put(4, std::make_shared<Bytes>(5)));    // still fits
  EXPECT_EQ(cache.bytes(), 25u);
  EXPECT_FALSE(cache.put(1, std::make_shared<Bytes>(1)));   // never replaced
}

// A fixed-sequence Rng stand-in: uniform() returns the values in order.
TEST(Transforms, RandomResizedCropFallsBackToCentredClampedRatio) {
  // scale (1,1) and ratio (2,2) on a 100x100 image: w = round(sqrt(1e4*2)) = 141 > 100
  // every try, so the fallback: in_ratio 1 < 2 -> w = 100, h = round(100/2) = 50, centred.
  Rng rng(1);
  RandomResizedCropParams p{1.0, 1.0, 2.0, 2.0};
  EXPECT_EQ(random_resized_crop_box(100, 100, p, rng), (CropBox{0, 25, 100, 50}));
  // in_ratio 4 > 4/3: h = 50, w = round(50 * 4/3) = 67, x = (200-67)/2 = 66.
  RandomResizedCropParams q{1.0, 1.0, 3.0, 4.0 / 3.0};
  EXPECT_EQ(random_resized_crop_box(200, 50, q, rng), (CropBox{66, 0, 67, 50}));
}

TEST(Transforms, RandomResizedCropFullAreaSquare) {
  // scale 1, ratio 1: w = h = round(sqrt(W*H)) only fits when W == H: the whole image.
  Rng rng(7);
  RandomResizedCropParams p{1.0, 1.0, 1.0, 1.0};
  EXPECT_EQ(random_resized_crop_box(64, 64, p, rng), (CropBox{0, 0, 64, 64}));
}

TEST(Transforms, RandomResizedCropStaysInsideAndInRange) {
  Rng rng(3);
  RandomResizedCropParams p;
  for (int i = 0; i < 2000; ++i) {
    const CropBox b = random_resized_crop_box(500, 375, p, rng);
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_LE(b.x + b.w, 500);
    ASSERT_LE(b.y + b.h, 375);
    ASSERT_GT(b.w, 0);
    ASSERT_GT(b.h, 0);
  }
}

TEST(Transforms, CenterCropBoxMatchesResizeThenCenterCrop) {
  // 512x256: Resize(256) keeps it (scale 1), CenterCrop(224): left = round((512-224)/2) = 144, top = 16.
  EXPECT_EQ(center_crop_box(512, 256, 256, 224), (CropBox{144, 16, 224, 224}));
  // 500x375: scale 256/375; resized 341x256; crop left round(58.5)=58 (banker's? lround: 59), top 16.
  const CropBox b = center_crop_box(500, 375, 256, 224);
  EXPECT_EQ(b.w, 328);  // round(224 * 375/256) = 328
  EXPECT_EQ(b.h, 328);
  EXPECT_NEAR(b.x, (500 - 328) / 2, 1);
  EXPECT_NEAR(b.y, (375 - 328) / 2, 1);
}

TEST(Transforms, ScaleBoxFollowsTheDecodeScale) {
  EXPECT_EQ(scale_box({100, 40, 200, 160}, {1, 2}, 250, 188), (CropBox{50, 20, 100, 80}));
  EXPECT_EQ(scale_box({100, 40, 200, 160}, {1, 1}, 500, 375), (CropBox{100, 40, 200, 160}));
}

TEST(Transforms, ChooseScaleKeepsTheCropAtLeastOutputSize) {
  const std::vector<ScalingFactor> f{{1, 1}, {7, 8}, {3, 4}, {5, 8}, {1, 2}, {3, 8}, {1, 4}, {1, 8}};
  EXPECT_EQ(choose_scale(f, 500, 500, 224, 224).denom, 2);   // 250 >= 224, 3/8 -> 187 < 224
  EXPECT_EQ(choose_scale(f, 2000, 2000, 224, 224).denom, 8); // 250
  const ScalingFactor s = choose_scale(f, 300, 300, 224, 224);  // 3/4 -> 225
  EXPECT_EQ(s.num, 3);
  EXPECT_EQ(s.denom, 4);
  EXPECT_EQ(choose_scale(f, 100, 100, 224, 224).num, 1);     // upsampling: full scale
}

TEST(Transforms, CollateNormalizesAndFlipsIntoChw) {
  // A 2x1 RGB image: pixel 0 = (255, 0, 51), pixel 1 = (0, 255, 102).
  const std::uint8_t hwc[] = {255, 0, 51, 0, 255, 102};
  Normalize n{{0.5f, 0.5f, 0.0f}, {0.5f, 0.25f, 1.0f}};
  float out[6];
  collate_chw_float(hwc, 2, 1, 3, false, n, out);
  EXPECT_FLOAT_EQ(out[0], 1.0f);    // R(0): (1 - .5)/.5
  EXPECT_FLOAT_EQ(out[1], -1.0f);   // R(1): (0 - .5)/.5
  EXPECT_FLOAT_EQ(out[2], -2.0f);   // G(0): (0 - .5)/.25
  EXPECT_FLOAT_EQ(out[3], 2.0f);    // G(1)
  EXPECT_NEAR(out[4], 0.2f, 1e-6);  // B(0): 51/255
  EXPECT_NEAR(out[5], 0.4f, 1e-6);
  collate_chw_float(hwc, 2, 1, 3, true, n, out);
  EXPECT_FLOAT_EQ(out[0], -1.0f);
  EXPECT_FLOAT_EQ(out[1], 1.0f);
  std::uint8_t u[6];
  collate_chw_uint8(hwc, 2, 1, 3, true, u);
  EXPECT_EQ(std::vector<int>(u, u + 6), (std::vector<int>{0, 255, 255, 0, 102, 51}));
}

// The SIMD collates (flip, split, convertTo) against the definition, pixel by pixel, on a
// sample large enough for the vector paths (and an odd width for their tails).
TEST(Transforms, CollateMatchesTheScalarDefinitionOnWholeSamples) {
  for (const int w : {224, 37}) {
    const int h = 19;
    std::vector<std::uint8_t> hwc(static_cast<std::size_t>(w) * h * 3);
    Rng rng(3);
    for (auto& v : hwc) v = static_cast<std::uint8_t>(rng.next());
    const Normalize n;
    std::vector<float> f(hwc.size());
    std::vector<std::uint8_t> u(hwc.size());
    for (const bool flip : {false, true}) {
      collate_chw_float(hwc.data(), w, h, 3, flip, n, f.data());
      collate_chw_uint8(hwc.data(), w, h, 3, flip, u.data());
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < h; ++y) {
          for (int x = 0; x < w; ++x) {
            const int sx = flip ? w - 1 - x : x;
            const std::uint8_t v = hwc[(static_cast<std::size_t>(y) * w + sx) * 3 + c];
            const std::size_t o = (static_cast<std::size_t>(c) * h + y) * w + x;
            ASSERT_EQ(u[o], v) << w << " " << flip << " " << c << " " << y << " " << x;
            ASSERT_NEAR(f[o], (v / 255.0 - n.mean[c]) / n.std[c], 1e-5) << w << " " << flip;
          }
        }
      }
    }
  }
}

TEST(Transforms, ResizeCropOfAUniformImageIsUniform) {
  std::vector<std::uint8_t> img(40 * 30 * 3, 77);
  std::vector<std::uint8_t> out(16 * 16 * 3, 0);
  resize_crop(img.data(), 40, 30, 3, {5, 5, 20, 20}, 16, 16, out.data());
  for (auto v : out) ASSERT_EQ(v, 77);
}

TEST(JpegDecoder, DecodesGeneratedJpegAtEveryScale) {
  const int w = 480, h = 360;
  const auto rgb = mlbench::datasets::synthesize_photo_like(11, w, h);
  const auto jpeg = mlbench::datasets::encode_jpeg_rgb(rgb.data(), w, h, 90);
  JpegDecoder dec;
  int hw = 0, hh = 0;
  dec.header(jpeg.data(), jpeg.size(), hw, hh);
  EXPECT_EQ(hw, w);
  EXPECT_EQ(hh, h);
  ASSERT_FALSE(JpegDecoder::scaling_factors().empty());
  for (const ScalingFactor& f : JpegDecoder::scaling_factors()) {
    if (f.num > f.denom) continue;
    Image img;
    dec.decode(jpeg.data(), jpeg.size(), f, img);
    EXPECT_EQ(img.width, f.scaled(w)) << f.num << "/" << f.denom;
    EXPECT_EQ(img.height, f.scaled(h));
    // Compare the mean colour with the source: scaling must not change the content.
    double src = 0, dst = 0;
    for (auto v : rgb) src += v;
    for (auto v : img.pixels) dst += v;
    EXPECT_NEAR(dst / img.pixels.size(), src / rgb.size(), 3.0) << f.num << "/" << f.denom;
  }
}

TEST(JpegDecoder, FastScalesArePowersOfTwoDownscales) {
  const auto& f = JpegDecoder::fast_scaling_factors();
  ASSERT_EQ(f.size(), 4u);
  for (const ScalingFactor& s : f) {
    EXPECT_EQ(s.num, 1);
    EXPECT_TRUE(s.denom == 1 || s.denom == 2 || s.denom == 4 || s.denom == 8) << s.denom;
  }
  EXPECT_EQ(choose_scale(f, 300, 300, 224, 224).denom, 1);  // 3/4 is not among them
  EXPECT_EQ(choose_scale(f, 460, 450, 224, 224).denom, 2);
}

TEST(JpegDecoder, RejectsGarbageAndTruncation) {
  JpegDecoder dec;
  Image img;
  const Bytes garbage(1000, 0x42);
  EXPECT_THROW(dec.decode(garbage.data(), garbage.size(), {1, 1}, img), DecodeError);
  const auto rgb = mlbench::datasets::synthesize_photo_like(3, 200, 150);
  auto jpeg = mlbench::datasets::encode_jpeg_rgb(rgb.data(), 200, 150, 90);
  jpeg.resize(jpeg.size() / 2);
  EXPECT_THROW(dec.decode(jpeg.data(), jpeg.size(), {1, 1}, img), DecodeError);
}

namespace {

// A JPEG of `rgb` with the given TurboJPEG chroma subsampling (TJSAMP_*); TJSAMP_GRAY makes a one-component JPEG.
Bytes encode_with_subsampling(const std::vector<std::uint8_t>& rgb, int w, int h, int subsamp) {
  tjhandle handle = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(handle, rgb.data(), w, 0, h, TJPF_RGB, &buf, &size, subsamp, 90, 0);
  Bytes out;
  if (rc == 0) out.assign(buf, buf + size);
  tjFree(buf);
  tjDestroy(handle);
  return out;
}

// Mean and max absolute difference of two equally sized byte arrays.
std::pair<double, int> diff(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  double sum = 0;
  int max = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const int d = std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
    sum += d;
    max = std::max(max, d);
  }
  return {sum / static_cast<double>(n), max};
}

// The pixels of `box` in an interleaved RGB image, as a dense array.
std::vector<std::uint8_t> cut(const Image& img, const CropBox& box) {
  std::vector<std::uint8_t> out;
  for (int y = box.y; y < box.y + box.h; ++y) {
    const std::uint8_t* row = img.pixels.data() + (static_cast<std::size_t>(y) * img.width + box.x) * 3;
    out.insert(out.end(), row, row + static_cast<std::size_t>(box.w) * 3);
  }
  return out;
}

}  // namespace

// Region decode at scale s == full decode at s + scale_box crop (up to chroma upsampling at the
// window's edges), and after the resize to the output size; for every scale, boxes at all edges,
// 4:2:0 / 4:2:2 / 4:4:4 / grayscale.
TEST(JpegDecoder, RegionDecodeEqualsFullDecodeThenCrop) {
  const int w = 483, h = 365;  // not multiples of the iMCU size
  const auto rgb = mlbench::datasets::synthesize_photo_like(29, w, h);
  const std::vector<CropBox> boxes{{0, 0, w, h},       {0, 0, 50, 40},     {w - 37, h - 29, 37, 29},
                                   {123, 77, 200, 150}, {1, 333, 479, 32},  {17, 0, 9, h},
                                   {w - 300, 5, 300, 300}, {241, 180, 1, 1}};
  JpegDecoder dec;
  for (int subsamp : {TJSAMP_420, TJSAMP_422, TJSAMP_444, TJSAMP_GRAY}) {
    const Bytes jpeg = encode_with_subsampling(rgb, w, h, subsamp);
    ASSERT_FALSE(jpeg.empty());
    for (const ScalingFactor& f : JpegDecoder::scaling_factors()) {
      if (f.num > f.denom) continue;
      Image full, region;
      dec.decode(jpeg.data(), jpeg.size(), f, full);
      for (const CropBox& box : boxes) {
        const std::string what = fmt::format("subsamp {} scale {}/{} box {},{} {}x{}", subsamp, f.num, f.denom, box.x,
                                             box.y, box.w, box.h);
        const CropBox expect = scale_box(box, f, full.width, full.height);
        const CropBox got = dec.decode_region(jpeg.data(), jpeg.size(), box, f, region);
        ASSERT_EQ(got.w, expect.w) << what;
        ASSERT_EQ(got.h, expect.h) << what;
        ASSERT_EQ(got.y, 0) << what;
        ASSERT_GE(got.x, 0) << what;
        ASSERT_LE(got.x + got.w, region.width) << what;
        ASSERT_EQ(region.height, expect.h) << what;
        const auto a = cut(full, expect), b = cut(region, got);
        const auto [mean, max] = diff(a.data(), b.data(), a.size());
        // Chroma upsampling differs only next to the window's left/right edge: a narrow window is all edge.
        const double mean_limit = expect.w >= 16 ? 0.5 : 6.0;
        EXPECT_LT(mean, mean_limit) << what;
        EXPECT_LE(max, 24) << what;
        // After the resize to the output size.
        const int out = 32;
        std::vector<std::uint8_t> ra(out * out * 3), rb(out * out * 3);
        resize_crop(full.pixels.data(), full.width, full.height, 3, expect, out, out, ra.data());
        resize_crop(region.pixels.data(), region.width, region.height, 3, got, out, out, rb.data());
        const auto [rmean, rmax] = diff(ra.data(), rb.data(), ra.size());
        EXPECT_LT(rmean, mean_limit) << what;
        EXPECT_LE(rmax, 16) << what;
      }
    }
  }
}

// What the loader does (RandomResizedCrop box, smallest covering scale, region decode, resize to
// 224) against the reference (full-size decode, crop the same box, resize): close, as DCT scaling
// only changes the downscale filter (the remaining bilinear downscale is < 2x).
TEST(JpegDecoder, ScaledRegionDecodeIsCloseToFullSizeCropResize) {
  const int w = 500, h = 375;
  // Smoothed (separable 9-tap box, twice) so that what is compared is the geometry, not how
  // DCT scaling and bilinear filter pixel noise: the scaled box's corners are whole decoded
  // pixels, up to one decoded pixel from the exact position.
  auto rgb = mlbench::datasets::synthesize_photo_like(5, w, h);
  for (int pass = 0; pass < 4; ++pass) {
    const bool horizontal = pass % 2 == 0;
    const auto in = rgb;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        for (int c = 0; c < 3; ++c) {
          int sum = 0;
          for (int d = -4; d <= 4; ++d) {
            const int xx = horizontal ? std::clamp(x + d, 0, w - 1) : x;
            const int yy = horizontal ? y : std::clamp(y + d, 0, h - 1);
            sum += in[(static_cast<std::size_t>(yy) * w + xx) * 3 + c];
          }
          rgb[(static_cast<std::size_t>(y) * w + x) * 3 + c] = static_cast<std::uint8_t>(sum / 9);
        }
      }
    }
  }
  const auto jpeg = mlbench::datasets::encode_jpeg_rgb(rgb.data(), w, h, 90);
  JpegDecoder dec;
  Image full, region;
  dec.decode(jpeg.data(), jpeg.size(), {1, 1}, full);
  Rng rng(7);
  const int out = 224;
  int scaled = 0;
  for (int i = 0; i < 60; ++i) {
    const CropBox box = random_resized_crop_box(w, h, {}, rng);
    const ScalingFactor f = choose_scale(JpegDecoder::scaling_factors(), box.w, box.h, out, out);
    scaled += f.num != f.denom;
    const CropBox got = dec.decode_region(jpeg.data(), jpeg.size(), box, f, region);
    std::vector<std::uint8_t> ra(out * out * 3), rb(out * out * 3);
    resize_crop(full.pixels.data(), full.width, full.height, 3, box, out, out, ra.data());
    resize_crop(region.pixels.data(), region.width, region.height, 3, got, out, out, rb.data());
    const auto [mean, max] = diff(ra.data(), rb.data(), ra.size());
    EXPECT_LT(mean, 2.0) << "scale " << f.num << "/" << f.denom << " box " << box.x << "," << box.y << " " << box.w
                         << "x" << box.h;
  }
  EXPECT_GT(scaled, 20);  // many boxes were decoded below full scale
}

// The loader's path: RGBX (4 bytes a pixel) from the planned region decode gives, channel by
// channel, the RGB region decode's bytes, and after the resize and both collates the RGB path's
// sample exactly (OpenCV's bilinear resize computes each channel alike whatever the pixel size).
TEST(JpegDecoder, RgbxPlannedRegionDecodeEqualsTheRgbPath) {
  const int w = 350, h = 341;
  const auto rgb = mlbench::datasets::synthesize_photo_like(41, w, h);
  JpegDecoder dec;
  Rng rng(9);
  for (int subsamp : {TJSAMP_420, TJSAMP_444, TJSAMP_GRAY}) {
    const Bytes jpeg = encode_with_subsampling(rgb, w, h, subsamp);
    ASSERT_FALSE(jpeg.empty());
    for (int i = 0; i < 12; ++i) {
      const CropBox box = random_resized_crop_box(w, h, {}, rng);
      const ScalingFactor f = i % 3 == 0 ? ScalingFactor{1, 2} : ScalingFactor{1, 1};
      const std::string what = fmt::format("subsamp {} box {},{} {}x{} scale 1/{}", subsamp, box.x, box.y, box.w, box.h,
                                           f.denom);
      Image a, b;
      const CropBox ga = dec.decode_region(jpeg.data(), jpeg.size(), box, f, a);
      int calls = 0, seen_w = 0, seen_h = 0;
      RegionPlan planned;
      const CropBox gb = dec.decode_region(
          jpeg.data(), jpeg.size(),
          [&](int pw, int ph) {
            ++calls;
            seen_w = pw;
            seen_h = ph;
            return RegionPlan{box, f};
          },
          b, PixelFormat::Rgbx, &planned);
      ASSERT_EQ(calls, 1) << what;
      EXPECT_EQ(seen_w, w);
      EXPECT_EQ(seen_h, h);
      EXPECT_EQ(planned.box, box);
      EXPECT_EQ(planned.scale.denom, f.denom);
      ASSERT_EQ(ga, gb) << what;
      ASSERT_EQ(a.channels, 3);
      ASSERT_EQ(b.channels, 4);
      ASSERT_EQ(a.width, b.width) << what;
      ASSERT_EQ(a.height, b.height) << what;
      for (std::size_t p = 0; p < static_cast<std::size_t>(a.width) * a.height; ++p) {
        for (int c = 0; c < 3; ++c) ASSERT_EQ(a.pixels[p * 3 + c], b.pixels[p * 4 + c]) << what << " pixel " << p;
      }
      const int out = 224;
      std::vector<std::uint8_t> ra(out * out * 3), rb(out * out * 4);
      resize_crop(a.pixels.data(), a.width, a.height, 3, ga, out, out, ra.data());
      resize_crop(b.pixels.data(), b.width, b.height, 4, gb, out, out, rb.data());
      for (const bool flip : {false, true}) {
        std::vector<float> fa(3 * out * out), fb(3 * out * out);
        std::vector<std::uint8_t> ua(3 * out * out), ub(3 * out * out);
        collate_chw_float(ra.data(), out, out, 3, flip, {}, fa.data());
        collate_chw_float(rb.data(), out, out, 3, flip, {}, fb.data(), 4);
        collate_chw_uint8(ra.data(), out, out, 3, flip, ua.data());
        collate_chw_uint8(rb.data(), out, out, 3, flip, ub.data(), 4);
        ASSERT_EQ(ua, ub) << what << " flip " << flip;
        ASSERT_EQ(fa, fb) << what << " flip " << flip;
      }
    }
  }
}

TEST(JpegDecoder, PlannedRegionDecodeDoesNotPlanForGarbage) {
  JpegDecoder dec;
  Image img;
  const Bytes garbage(1000, 0x42);
  int calls = 0;
  auto plan = [&](int, int) {
    ++calls;
    return RegionPlan{{0, 0, 1, 1}, {1, 1}};
  };
  EXPECT_THROW(dec.decode_region(garbage.data(), garbage.size(), plan, img, PixelFormat::Rgbx), DecodeError);
  EXPECT_EQ(calls, 0);
}

TEST(JpegDecoder, RegionDecodeRejectsGarbageAndTruncationEvenAboveTheCut) {
  JpegDecoder dec;
  Image img;
  const Bytes garbage(1000, 0x42);
  EXPECT_THROW(dec.decode_region(garbage.data(), garbage.size(), {0, 0, 10, 10}, {1, 1}, img), DecodeError);
  const int w = 320, h = 240;
  const auto rgb = mlbench::datasets::synthesize_photo_like(3, w, h);
  const auto jpeg = mlbench::datasets::encode_jpeg_rgb(rgb.data(), w, h, 90);
  for (double keep : {0.3, 0.6, 0.95}) {
    Bytes cut(jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() * keep));
    // The window is the top rows, inside the intact part of the file.
    EXPECT_THROW(dec.decode_region(cut.data(), cut.size(), {0, 0, 64, 16}, {1, 1}, img), DecodeError) << keep;
    EXPECT_THROW(dec.decode_region(cut.data(), cut.size(), {100, 100, 100, 100}, {1, 2}, img), DecodeError) << keep;
  }
  // Corrupt entropy data inside the window: libjpeg's warning is an error.
  Bytes bad = jpeg;
  for (std::size_t i = bad.size() / 3; i < bad.size() / 3 + 64; ++i) bad[i] = 0xFF;
  EXPECT_THROW(dec.decode_region(bad.data(), bad.size(), {0, 0, w, h}, {1, 1}, img), DecodeError);
  // The decoder is usable again after errors, and trailing bytes after EOI are accepted.
  Bytes padded = jpeg;
  padded.insert(padded.end(), {0, 0, 0, 0});
  const CropBox got = dec.decode_region(padded.data(), padded.size(), {10, 20, 100, 80}, {1, 1}, img);
  EXPECT_EQ(got.w, 100);
  EXPECT_EQ(img.height, 80);
}

TEST(JpegDecoder, EndOfImageMarker) {
  const std::uint8_t ok[] = {0x12, 0xFF, 0xD9};
  const std::uint8_t padded[] = {0x12, 0xFF, 0xD9, 0, 0};
  const std::uint8_t stuffed[] = {0x12, 0xFF, 0x00, 0xD9};
  EXPECT_TRUE(has_end_of_image(ok, sizeof ok));
  EXPECT_TRUE(has_end_of_image(padded, sizeof padded));
  EXPECT_FALSE(has_end_of_image(stuffed, sizeof stuffed));
  EXPECT_FALSE(has_end_of_image(ok, 2));
  EXPECT_FALSE(has_end_of_image(ok, 0));
}

namespace {

LoaderConfig small_config(int workers) {
  LoaderConfig c;
  c.batch_size = 4;
  c.workers = workers;
  c.transform.image_size = 16;
  c.max_epochs = 1;
  return c;
}

}  // namespace

TEST(ImageFolderReader, SortedClassesAndLabels) {
  const TempDir tmp("pipeline_reader");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 3, 2);
  fs::create_directories(root / "d_empty");
  ImageFolderReader r(root);
  EXPECT_EQ(r.classes(), (std::vector<std::string>{"c0", "c1", "c2", "d_empty"}));
  EXPECT_EQ(r.empty_classes(), (std::vector<std::string>{"d_empty"}));
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r.label(0), 0);
  EXPECT_EQ(r.label(5), 2);
  Bytes b;
  r.fetch(5, b);
  EXPECT_EQ(b.size(), fs::file_size(root / "c2" / "1.jpg"));
  EXPECT_THROW(ImageFolderReader(tmp.path() / "missing", "run datagen"), DataError);  // no such folder
}

// The size hint (the scan's size: no fstat per read) never changes what is read: a file that
// grew or shrank since the scan is read whole, to its end, as without a hint.
TEST(ReadFile, SizeHintReadsTheWholeFileEvenWhenItChangedSinceTheScan) {
  const TempDir tmp("pipeline_read_hint");
  const fs::path file = tmp.path() / "f.bin";
  const auto write = [&](std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + 3);
    std::ofstream(file, std::ios::binary) << s;
    return Bytes(s.begin(), s.end());
  };
  for (std::size_t n : {0u, 1u, 4095u, 4096u, 22000u}) {
    const Bytes expect = write(n);
    for (std::size_t hint : {n, n / 2, n + 1, n + 5000, std::size_t{0}}) {
      Bytes got{9, 9, 9};
      read_file(file, got, false, hint);
      EXPECT_EQ(got, expect) << "size " << n << " hint " << hint;
    }
    Bytes plain;
    read_file(file, plain);
    EXPECT_EQ(plain, expect);
  }
  // Through the reader: the file is rewritten larger, then smaller, after the scan.
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 1, 2);
  ImageFolderReader r(root);
  const fs::path f1 = r.path(1);
  for (std::size_t n : {fs::file_size(f1) + 3000, std::size_t{10}}) {
    std::string s(n, 'x');
    std::ofstream(f1, std::ios::binary) << s;
    Bytes b;
    r.fetch(1, b);
    EXPECT_EQ(b, Bytes(s.begin(), s.end()));
  }
  Bytes none;
  EXPECT_THROW(read_file(tmp.path() / "missing", none, false, 10), DataError);
  // fetch opens root-relative names from the root folder: the same bytes for a root given as an
  // absolute path, a relative one and one with a trailing separator.
  for (const fs::path& given : {root, fs::relative(root), fs::path(root.string() + "/")}) {
    ImageFolderReader g(given);
    ASSERT_EQ(g.size(), r.size()) << given;
    for (std::size_t i = 0; i < g.size(); ++i) {
      Bytes a, b;
      g.fetch(i, a);
      read_file(r.path(i), b);
      EXPECT_EQ(a, b) << given << " " << i;
    }
  }
}

TEST(Loader, CollatesFullBatchesInOrderWithLabels) {
  const TempDir tmp("pipeline_collate");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 2, 6);
  auto source = std::make_shared<ImageFolderReader>(root);
  for (int workers : {0, 3}) {
    LoaderConfig c = small_config(workers);
    c.shuffle = false;
    c.transform.mode = TransformMode::Eval;
    c.transform.resize_size = 16;
    Loader loader(source, c);
    EXPECT_EQ(loader.batches_per_epoch(), 3u);
    std::vector<std::int64_t> labels;
    long seq = 0;
    while (auto b = loader.next()) {
      EXPECT_EQ(b->sequence, seq++);
      EXPECT_EQ(b->size, 4);
      EXPECT_EQ(b->data.bytes, 4u * 3 * 16 * 16 * sizeof(float));
      labels.insert(labels.end(), b->labels.begin(), b->labels.end());
    }
    EXPECT_EQ(labels, (std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}));
    EXPECT_EQ(loader.stats().items(Stage::Decode), 12);
    EXPECT_GT(loader.stats().busy_ns(Stage::Decode), 0);
  }
}

TEST(Loader, SkipsCorruptFilesByDefaultAndFailsUnderStrict) {
  const TempDir tmp("pipeline_corrupt");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 2, 6);
  {
    std::ofstream(root / "c0" / "2.jpg", std::ios::trunc) << "this is not a jpeg";
    const auto size = fs::file_size(root / "c1" / "3.jpg");
    fs::resize_file(root / "c1" / "3.jpg", size / 3);  // truncated
  }
  auto source = std::make_shared<ImageFolderReader>(root);
  {
    LoaderConfig c = small_config(2);
    std::ostringstream warnings;
    c.warnings = &warnings;
    Loader loader(source, c);
    int batches = 0;
    while (auto b = loader.next()) {
      EXPECT_EQ(b->size, 4);  // kept full
      ++batches;
    }
    EXPECT_EQ(batches, 3);
    EXPECT_EQ(loader.stats().corrupt(), 2);
    EXPECT_NE(warnings.str().find("2.jpg"), std::string::npos) << warnings.str();
    EXPECT_NE(warnings.str().find("3.jpg"), std::string::npos) << warnings.str();
  }
  {
    LoaderConfig c = small_config(2);
    c.strict = true;
    Loader loader(source, c);
    try {
      while (loader.next()) {
      }
      FAIL() << "expected a DataError";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(".jpg"), std::string::npos) << e.what();
    }
  }
}

TEST(Loader, CacheCountsHitsAcrossEpochs) {
  const TempDir tmp("pipeline_cache");
  const fs::path root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 2, 4);
  auto source = std::make_shared<ImageFolderReader>(root);
  LoaderConfig c = small_config(2);
  c.max_epochs = 3;
  c.cache = parse_cache_size("50%");
  Loader loader(source, c);
  while (loader.next()) {
  }
  EXPECT_EQ(loader.cache()->items(), 4u);
  EXPECT_EQ(loader.cache()->hits(), 8u);  // 4 per epoch after the first
  EXPECT_EQ(loader.cache()->misses(), 16u);
}

TEST(Loader, SyntheticServesOneBatchForever) {
  LoaderConfig c = small_config(0);
  c.synthetic = true;
  Loader loader(nullptr, c);
  auto a = loader.next(), b = loader.next();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->data.data, b->data.data);
  EXPECT_EQ(loader.stats().items(Stage::Decode), 0);
}
