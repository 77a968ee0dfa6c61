// mlbench-decode-bound: the raw full-size JPEG decode rate of one core (the
// bound studies/compare_loader.sh compares the loader with): every file under
// DIR is read into memory first, then decoded at scale 1/1 to RGB with
// TurboJPEG, single-threaded, for --seconds; prints images/s as JSON.
// --stages: instead, the thread CPU time per image of each of the loader's
// per-sample stages (the fetch, the region decode, the resize, the collates)
// beside the full decode, measured image by image in one loop, so the ratio
// "loader path / full decode" is robust to a shared machine's load
// (docs/performance.md, "The loader vs PyTorch and the decode bound"; docs/pipeline.md).

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/cli.h"
#include "core/process.h"
#include "core/rng.h"
#include "pipeline/jpeg_decoder.h"
#include "pipeline/source.h"
#include "pipeline/transforms.h"

namespace {

using namespace mlbench::pipeline;

std::int64_t thread_cpu_ns() {
  return mlbench::core::this_thread_cpu_ns();
}

// The stages, in the order they run for every image.
enum StageId {
  kFetch,
  kFetchStat,
  kFullDecode,
  kHeader,
  kRegionDecode,
  kResize,
  kCollateFloat,
  kCollateUint8,
  kStageCount
};
constexpr const char* kStageNames[kStageCount] = {"fetch",         "fetch_fstat", "full_decode",     "header",
                                                  "region_decode", "resize",      "collate_float32", "collate_uint8"};

// Per image, as the loader's SampleStages::load does it for a train sample (RandomResizedCrop,
// flip p=0.5, `size` px): fetch (the ImageFolder read of the file: open ... close, page cache
// warm; "fetch_fstat": the same read with an fstat for the size instead of the scan's, as
// the loader once read, to show what reusing the scan's size saves), the region decode with
// its plan (the crop box drawn from the header it parses, RGBX),
// the resize of the crop, and each collate (the flip, when drawn, inside it as in the loader)
// into its slot of a batch-sized buffer (the loader writes a 154 MB float32 batch, not a
// cache-hot one). Beside them: the full decode (the bound) and a header parse alone (for
// information: the region decode parses its own). Each stage's time is the thread CPU time
// between two clock reads, less the clock's own cost (measured first). The collates are also
// split by whether the flip was drawn (what the flip costs).
nlohmann::json run_stages(const ImageFolderReader& reader, int rounds, int batch, int size, std::uint64_t seed,
                          const std::vector<ScalingFactor>& scales) {
  const std::size_t n = reader.size();
  std::vector<Bytes> files(n);
  for (std::size_t i = 0; i < n; ++i) reader.fetch(i, files[i]);
  JpegDecoder dec;
  Image full, region;
  Bytes fetched;
  const std::size_t plane = static_cast<std::size_t>(size) * size;
  std::vector<std::uint8_t> hwc(plane * 4);
  std::vector<float> batch_f(plane * 3 * batch);
  std::vector<std::uint8_t> batch_u(plane * 3 * batch);
  const TransformConfig tc;
  std::int64_t clock_ns = 0;  // the clock's own cost (a system call), subtracted from every stage
  {
    constexpr int kReads = 20000;
    const std::int64_t a = thread_cpu_ns();
    for (int i = 0; i < kReads; ++i) thread_cpu_ns();
    clock_ns = (thread_cpu_ns() - a) / (kReads + 1);
  }
  std::vector<std::vector<double>> per_round(kStageCount);  // us per image, each round
  std::vector<double> sum(kStageCount, 0.0);
  double flip_sum[2][2] = {{0, 0}, {0, 0}};  // [float32, uint8][not flipped, flipped], ns
  long flip_count[2] = {0, 0};
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> round_ns(kStageCount, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      const Bytes& f = files[i];
      mlbench::core::Rng rng(mlbench::core::splitmix64(seed ^ (static_cast<std::uint64_t>(r) * n + i)));
      const std::size_t slot = (i % static_cast<std::size_t>(batch)) * plane * 3;
      std::int64_t t[kStageCount + 1];
      int w = 0, h = 0;
      // The two fetches read different files (alternate images, swapped every round): reading the
      // same file twice would time the second read with the first's kernel caches warm.
      const bool hinted = (i + static_cast<std::size_t>(r)) % 2 == 0;
      t[kFetch] = thread_cpu_ns();
      if (hinted) reader.fetch(i, fetched);
      t[kFetchStat] = thread_cpu_ns();
      if (!hinted) read_file(reader.path(i), fetched);
      t[kFullDecode] = thread_cpu_ns();
      dec.decode(f.data(), f.size(), {1, 1}, full);
      t[kHeader] = thread_cpu_ns();
      dec.header(f.data(), f.size(), w, h);
      t[kRegionDecode] = thread_cpu_ns();
      const CropBox box = dec.decode_region(
          f.data(), f.size(),
          [&](int fw, int fh) {
            const CropBox b = random_resized_crop_box(fw, fh, tc.crop, rng);
            return RegionPlan{b, choose_scale(scales, b.w, b.h, size, size)};
          },
          region, PixelFormat::Rgbx);
      const bool flip = rng.uniform() < 0.5;
      t[kResize] = thread_cpu_ns();
      resize_crop(region.pixels.data(), region.width, region.height, region.channels, box, size, size, hwc.data());
      t[kCollateFloat] = thread_cpu_ns();
      collate_chw_float(hwc.data(), size, size, 3, flip, tc.normalize, batch_f.data() + slot, region.channels);
      t[kCollateUint8] = thread_cpu_ns();
      collate_chw_uint8(hwc.data(), size, size, 3, flip, batch_u.data() + slot, region.channels);
      t[kStageCount] = thread_cpu_ns();
      for (int s = 0; s < kStageCount; ++s) {
        if (s == (hinted ? kFetchStat : kFetch)) continue;  // the fetch not run for this image
        round_ns[s] += static_cast<double>(t[s + 1] - t[s] - clock_ns);
      }
      flip_sum[0][flip] += static_cast<double>(t[kCollateUint8] - t[kCollateFloat] - clock_ns);
      flip_sum[1][flip] += static_cast<double>(t[kStageCount] - t[kCollateUint8] - clock_ns);
      ++flip_count[flip];
    }
    for (int s = 0; s < kStageCount; ++s) {
      // The fetches ran on half of the images each.
      const double count = s == kFetch || s == kFetchStat ? static_cast<double>(n) / 2 : static_cast<double>(n);
      per_round[s].push_back(round_ns[s] / 1000.0 / count);
      sum[s] += round_ns[s];
    }
  }
  const double images = static_cast<double>(n) * rounds;
  const auto us = [&](int s) { return sum[s] / 1000.0 / (s == kFetch || s == kFetchStat ? images / 2 : images); };
  nlohmann::json stages = nlohmann::json::object();
  for (int s = 0; s < kStageCount; ++s) {
    const auto& v = per_round[s];
    stages[kStageNames[s]] = {{"us", us(s)},
                              {"min_round_us", *std::min_element(v.begin(), v.end())},
                              {"max_round_us", *std::max_element(v.begin(), v.end())}};
  }
  const auto mean_us = [&](int out, int flipped) {
    return flip_count[flipped] ? flip_sum[out][flipped] / 1000.0 / static_cast<double>(flip_count[flipped]) : 0.0;
  };
  const double path_f = us(kRegionDecode) + us(kResize) + us(kCollateFloat);
  const double path_u = us(kRegionDecode) + us(kResize) + us(kCollateUint8);
  return {{"images", static_cast<long>(images)},
          {"files", n},
          {"rounds", rounds},
          {"clock_read_ns", clock_ns},
          {"scales", scales.size() == JpegDecoder::fast_scaling_factors().size() ? "fast" : "all"},
          {"stages", stages},
          {"collate_by_flip_us",
           {{"float32", {{"not_flipped", mean_us(0, 0)}, {"flipped", mean_us(0, 1)}}},
            {"uint8", {{"not_flipped", mean_us(1, 0)}, {"flipped", mean_us(1, 1)}}},
            {"flipped_share", static_cast<double>(flip_count[1]) / images}}},
          {"loader_path_us", {{"float32", path_f}, {"uint8", path_u}}},
          {"loader_path_with_fetch_us", {{"float32", path_f + us(kFetch)}, {"uint8", path_u + us(kFetch)}}},
          {"full_decode_over_loader_path",
           {{"float32", us(kFullDecode) / path_f},
            {"uint8", us(kFullDecode) / path_u},
            {"float32_with_fetch", us(kFullDecode) / (path_f + us(kFetch))},
            {"uint8_with_fetch", us(kFullDecode) / (path_u + us(kFetch))}}}};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mlbench::pipeline;
  CLI::App app(
      "mlbench-decode-bound: full-size TurboJPEG decode rate of one core over an ImageFolder; with --stages, "
      "the thread CPU time per image of each of the loader's per-sample stages beside it",
      "mlbench-decode-bound");
  std::string root;
  double seconds = 5;
  bool stages = false;
  int rounds = 2, batch = 256, size = 224;
  std::uint64_t seed = 0;
  std::string scales = "fast";
  app.add_option("root", root, "ImageFolder root (root/<class>/<file>.jpg)")->required();
  app.add_option("--seconds", seconds, "Minimum decode time")->check(mlbench::core::number_above(0));
  app.add_flag("--stages", stages,
               "Per-stage thread CPU time per image (fetch, full decode, header, region decode, resize, collates)");
  app.add_option("--rounds", rounds, "--stages: passes over the dataset")->check(mlbench::core::integer_in(1, 1000));
  app.add_option("--batch-size", batch, "--stages: slots of the batch buffer the collates write into")
      ->check(mlbench::core::integer_in(1, 4096));
  app.add_option("--image-size", size, "--stages: output height = width")->check(mlbench::core::integer_in(8, 4096));
  app.add_option("--seed", seed, "--stages: seed of the random crops and flips");
  app.add_option("--scales", scales,
                 "--stages: DCT scales the region decode may pick: fast (1/1, 1/2, 1/4, 1/8: SIMD IDCT; the "
                 "loader's) or all (also 7/8, 3/4 ...: C IDCT)")
      ->check(CLI::IsMember({"fast", "all"}));
  CLI11_PARSE(app, argc, argv);
  try {
    ImageFolderReader reader(root);
    if (stages) {
      std::cout << run_stages(reader, rounds, batch, size, seed,
                              scales == "fast" ? JpegDecoder::fast_scaling_factors() : JpegDecoder::scaling_factors())
                       .dump()
                << "\n";
      return 0;
    }
    std::vector<Bytes> files(reader.size());
    for (std::size_t i = 0; i < files.size(); ++i) reader.fetch(i, files[i]);
    JpegDecoder dec;
    Image img;
    long decoded = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    while (elapsed < seconds) {
      for (const Bytes& f : files) {
        dec.decode(f.data(), f.size(), {1, 1}, img);
        ++decoded;
      }
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::cout << nlohmann::json{{"images", decoded},
                                {"seconds", elapsed},
                                {"images_per_s", decoded / elapsed},
                                {"files", files.size()}}
                     .dump()
              << "\n";
  } catch (const std::exception& e) {
    std::cerr << "mlbench-decode-bound: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
