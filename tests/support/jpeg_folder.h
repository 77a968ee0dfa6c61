// Test support: a small ImageFolder of real JPEGs (datasets' photo-like
// images), for the tests that read images through the pipeline.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "datasets/fake_imagenet.h"

namespace mlbench::testing_support {

// root/c<k>/<i>.jpg: `per_class` 64x48 photo-like JPEGs (quality 90) in each of
// `classes` class folders, deterministic; returns root.
inline std::filesystem::path make_jpeg_folder(const std::filesystem::path& root, int classes, int per_class) {
  for (int c = 0; c < classes; ++c) {
    const std::filesystem::path dir = root / std::string("c").append(std::to_string(c));
    std::filesystem::create_directories(dir);
    for (int i = 0; i < per_class; ++i) {
      const auto rgb = mlbench::datasets::synthesize_photo_like(c * 100 + i, 64, 48);
      const auto jpeg = mlbench::datasets::encode_jpeg_rgb(rgb.data(), 64, 48, 90);
      std::ofstream(dir / std::to_string(i).append(".jpg"), std::ios::binary)
          .write(reinterpret_cast<const char*>(jpeg.data()), static_cast<std::streamsize>(jpeg.size()));
    }
  }
  return root;
}

}  // namespace mlbench::testing_support
