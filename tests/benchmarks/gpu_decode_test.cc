// benchmarks/support/gpu_decode: --decode gpu. Its geometry (crop, resize, flip,
// normalise as batched tensor ops) runs on the CPU too and is checked here
// against the CPU path's OpenCV resize; the loader's GPU-decode batches carry
// the CPU path's crops and flips. The nvJPEG tests skip, saying why, without a
// CUDA build and a GPU; on one they compare its pixels with libjpeg-turbo's.
// MLBENCH_GPU_DECODE_DATA=DIR (an ImageFolder of JPEGs, e.g. real photographs)
// runs the device comparison on DIR as well.
#include "benchmarks/support/gpu_decode.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include <gtest/gtest.h>

#include "benchmarks/support/image_stream.h"
#include "core/rng.h"
#include "pipeline/image_dataset.h"
#include "pipeline/loader.h"
#include "pipeline/options.h"
#include "pipeline/torch_adapter.h"
#include "tests/support/jpeg_folder.h"
#include "tests/support/temp_dir.h"

namespace mlbench::bench {
namespace {

using pipeline::EncodedSample;

#define SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                  \
    if (!built_with_cuda()) GTEST_SKIP() << "this LibTorch was built without CUDA";     \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine"; \
  } while (0)

// |a - b| in levels of 0..255 (the batches are normalised: x = (v / 255 - mean) / std).
torch::Tensor level_diff(const torch::Tensor& a, const torch::Tensor& b, const pipeline::Normalize& nz) {
  const auto std = torch::tensor({nz.std[0], nz.std[1], nz.std[2]}).view({1, 3, 1, 1});
  return ((a.cpu() - b.cpu()).abs() * std * 255.0);
}

// Interleaved RGB images -> a planar [N, 3, H, W] canvas, each in its top-left corner.
torch::Tensor make_canvas(const std::vector<std::vector<std::uint8_t>>& rgb, const std::vector<EncodedSample>& s) {
  int h = 1, w = 1;
  for (const auto& e : s) {
    h = std::max(h, e.height);
    w = std::max(w, e.width);
  }
  auto canvas = torch::zeros({static_cast<long>(s.size()), 3, h, w}, torch::kUInt8);
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto img = torch::from_blob(const_cast<std::uint8_t*>(rgb[i].data()), {s[i].height, s[i].width, 3}, torch::kUInt8);
    canvas[static_cast<long>(i)].narrow(1, 0, s[i].height).narrow(2, 0, s[i].width).copy_(img.permute({2, 0, 1}));
  }
  return canvas;
}

// The CPU path's augment of one full-size RGB image: OpenCV's resize, then flip and normalise.
torch::Tensor cpu_augment(const std::vector<std::uint8_t>& rgb, const EncodedSample& s, int size,
                          const pipeline::Normalize& nz) {
  std::vector<std::uint8_t> hwc(static_cast<std::size_t>(size) * size * 3);
  pipeline::resize_crop(rgb.data(), s.width, s.height, 3, s.box, size, size, hwc.data());
  auto out = torch::empty({3, size, size}, torch::kFloat32);
  pipeline::collate_chw_float(hwc.data(), size, size, 3, s.flip, nz, out.data_ptr<float>());
  return out;
}

TEST(GpuDecode, TheBatchedCropResizeIsTheCpuPathsResizeWithinOneLevel) {
  const pipeline::Normalize nz;
  const int size = 32;
  core::Rng rng(11);
  std::vector<std::vector<std::uint8_t>> images;
  std::vector<EncodedSample> samples;
  const std::pair<int, int> sizes[] = {{64, 48}, {37, 91}, {200, 150}, {32, 32}, {120, 33}, {70, 70}};
  for (int i = 0; i < 12; ++i) {
    const auto [w, h] = sizes[i % 6];
    std::vector<std::uint8_t> rgb(static_cast<std::size_t>(w) * h * 3);
    for (auto& v : rgb) v = static_cast<std::uint8_t>(rng.next());  // noise: the worst case for interpolation
    EncodedSample s;
    s.width = w;
    s.height = h;
    if (i == 3) {
      s.box = {0, 0, 32, 32};  // the output size: a copy
    } else if (i == 5) {
      s.box = pipeline::center_crop_box(w, h, 40, size);
    } else {
      s.box = pipeline::random_resized_crop_box(w, h, pipeline::RandomResizedCropParams{}, rng);
    }
    s.flip = i % 2 == 1;
    images.push_back(std::move(rgb));
    samples.push_back(s);
  }
  const auto got = crop_resize_normalize(make_canvas(images, samples), samples, size, nz);
  ASSERT_EQ(got.sizes(), (std::vector<long>{12, 3, size, size}));
  std::vector<torch::Tensor> want;
  for (std::size_t i = 0; i < samples.size(); ++i) want.push_back(cpu_augment(images[i], samples[i], size, nz));
  const auto d = level_diff(got, torch::stack(want), nz);
  EXPECT_LE(d.max().item<double>(), 1.0 + 1e-3) << "largest difference, in levels of 255";
  EXPECT_LE(d.mean().item<double>(), 0.5);
}

TEST(GpuDecode, AFlipMirrorsTheSampleAndNothingElse) {
  const pipeline::Normalize nz;
  std::vector<std::uint8_t> rgb(50 * 40 * 3);
  for (std::size_t k = 0; k < rgb.size(); ++k) rgb[k] = static_cast<std::uint8_t>(k * 7 % 251);
  EncodedSample a;
  a.width = 50;
  a.height = 40;
  a.box = {5, 3, 30, 30};
  EncodedSample b = a;
  b.flip = true;
  const auto out = crop_resize_normalize(make_canvas({rgb, rgb}, {a, b}), {a, b}, 16, nz);
  EXPECT_TRUE(torch::allclose(out[0].flip({2}), out[1]));
  EXPECT_FALSE(torch::allclose(out[0], out[1]));
}

struct Batches {
  pipeline::Batch cpu, gpu;
};

// One batch of the same loader (seed, order, crops) with the CPU path and with --decode gpu's CPU half.
Batches first_batches(const std::string& dir, int batch, int size) {
  auto source = std::make_shared<pipeline::ImageFolderReader>(dir, "");
  pipeline::LoaderConfig c;
  c.batch_size = batch;
  c.workers = 0;
  c.io_depth = 0;
  c.seed = 7;
  c.transform.image_size = size;
  pipeline::Loader cpu(source, c);
  c.transform.decode_on_device = true;
  pipeline::Loader gpu(source, c);
  Batches b{*cpu.next(), *gpu.next()};
  cpu.stop();
  gpu.stop();
  return b;
}

// Full decodes (libjpeg-turbo, scale 1) of the batch's JPEGs.
std::vector<std::vector<std::uint8_t>> decode_all(const std::vector<EncodedSample>& s) {
  pipeline::JpegDecoder dec;
  std::vector<std::vector<std::uint8_t>> out;
  for (const auto& e : s) {
    pipeline::Image img;
    dec.decode(e.jpeg.data(), e.jpeg.size(), pipeline::ScalingFactor{1, 1}, img, pipeline::PixelFormat::Rgb);
    out.push_back(std::move(img.pixels));
  }
  return out;
}

TEST(GpuDecode, TheLoaderHandsTheDeviceEachJpegWithTheCpuPathsCropAndFlip) {
  auto tmp = testing_support::temp_dir_for_current_test("gpu-decode");
  const auto dir = testing_support::make_jpeg_folder(tmp->path() / "data", 2, 8);
  const int size = 32;  // the 64x48 images' crops are never 2x the output: libjpeg-turbo decodes at scale 1
  const auto b = first_batches(dir.string(), 8, size);
  ASSERT_EQ(b.gpu.encoded.size(), 8u);
  EXPECT_EQ(b.gpu.data.data, nullptr);  // no pixels on the host
  EXPECT_EQ(b.gpu.labels, b.cpu.labels);
  for (const auto& e : b.gpu.encoded) {
    EXPECT_EQ(e.width, 64);
    EXPECT_EQ(e.height, 48);
    EXPECT_GE(e.box.x, 0);
    EXPECT_LE(e.box.x + e.box.w, 64);
    EXPECT_LE(e.box.y + e.box.h, 48);
    ASSERT_GT(e.jpeg.size(), 4u);
    EXPECT_EQ(e.jpeg[0], 0xFF);
    EXPECT_EQ(e.jpeg[1], 0xD8);
  }
  // The same crops and flips: the device's augment of full decodes equals the CPU batch, up to
  // the region decode's chroma rounding at the window's edges.
  const pipeline::Normalize nz;
  const auto rgb = decode_all(b.gpu.encoded);
  const auto got = crop_resize_normalize(make_canvas(rgb, b.gpu.encoded), b.gpu.encoded, size, nz);
  const auto cpu = pipeline::to_tensors(b.cpu).data;
  const auto d = level_diff(got, cpu, nz);
  EXPECT_LE(d.mean().item<double>(), 0.5);
  EXPECT_LE(d.max().item<double>(), 16.0);
}

TEST(GpuDecode, WithoutACudaDeviceDecodeGpuIsAUsageErrorSayingSo) {
  auto tmp = testing_support::temp_dir_for_current_test("gpu-decode-cpu");
  const auto dir = testing_support::make_jpeg_folder(tmp->path() / "data", 1, 4);
  core::BenchOptions o;
  o.batch_size = 2;
  o.data = dir.string();
  pipeline::PipelineOptions p;
  p.decode = "gpu";
  p.io_depth = 0;
  try {
    vision::make_image_stream(o, p, torch::kCPU, vision::ImageData{.dataset = "x"});
    FAIL() << "expected a UsageError";
  } catch (const core::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--decode gpu"), std::string::npos) << e.what();
  }
}

// nvJPEG against libjpeg-turbo on the same crops: the decoders' IDCT and chroma upsampling differ.
void compare_on_device(const std::string& dir, int batch, int size) {
  const auto b = first_batches(dir, batch, size);
  const pipeline::Normalize nz;
  const auto rgb = decode_all(b.gpu.encoded);
  const auto want = crop_resize_normalize(make_canvas(rgb, b.gpu.encoded), b.gpu.encoded, size, nz);
  GpuJpegDecoder dec(torch::Device(torch::kCUDA, 0), size, nz);
  const auto got = dec.decode(b.gpu.encoded);
  const auto d = level_diff(got, want, nz);
  const auto cpu = level_diff(got, pipeline::to_tensors(b.cpu).data, nz);
  const auto info = dec.to_json();
  std::cout << "nvJPEG " << info["backend"] << " (" << info["library"] << "): vs libjpeg-turbo's full decode mean "
            << d.mean().item<double>() << " max " << d.max().item<double>()
            << " levels; vs the CPU path's batch (its DCT-scaled region decode) mean " << cpu.mean().item<double>()
            << " max " << cpu.max().item<double>() << " levels" << std::endl;  // flushed: a later crash keeps it
  EXPECT_EQ(info["corrupt_samples"], 0);
  EXPECT_LE(d.mean().item<double>(), 2.0);
  EXPECT_LE(cpu.mean().item<double>(), 6.0);
}

TEST(GpuDecode, NvjpegDecodesAsLibjpegTurboWithinTwoLevelsOnAverage) {
  SKIP_WITHOUT_GPU();
  auto tmp = testing_support::temp_dir_for_current_test("gpu-decode-dev");
  const auto dir = testing_support::make_jpeg_folder(tmp->path() / "data", 2, 8);
  compare_on_device(dir.string(), 16, 32);
  if (const char* real = std::getenv("MLBENCH_GPU_DECODE_DATA"); real && *real) {
    std::cout << "on " << real << ":\n";
    compare_on_device(real, 64, 224);
  }
}

}  // namespace
}  // namespace mlbench::bench
