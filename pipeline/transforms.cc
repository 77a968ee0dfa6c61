#include "pipeline/transforms.h"

#include <algorithm>
#include <cmath>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace mlbench::pipeline {

CropBox random_resized_crop_box(int width, int height, const RandomResizedCropParams& p, Rng& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(p.ratio_min), log_hi = std::log(p.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(p.scale_min, p.scale_max);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int w = static_cast<int>(std::lround(std::sqrt(target_area * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target_area / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int y = rng.integer(0, height - h);
      const int x = rng.integer(0, width - w);
      return {x, y, w, h};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < p.ratio_min) {
    h = static_cast<int>(std::lround(w / p.ratio_min));
  } else if (in_ratio > p.ratio_max) {
    w = static_cast<int>(std::lround(h * p.ratio_max));
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

CropBox center_crop_box(int width, int height, int resize_to, int crop) {
  // torchvision Resize(int): the shorter side becomes resize_to, the longer int(resize_to * long / short).
  const bool wide = width >= height;
  const int short_side = wide ? height : width;
  const double s = static_cast<double>(resize_to) / short_side;
  const int rw = wide ? static_cast<int>(static_cast<long>(resize_to) * width / height) : resize_to;
  const int rh = wide ? resize_to : static_cast<int>(static_cast<long>(resize_to) * height / width);
  // CenterCrop: top = int(round((h - crop) / 2)), in resized pixels, mapped back.
  const int cw = std::min(crop, rw), ch = std::min(crop, rh);
  const int top = static_cast<int>(std::lround((rh - ch) / 2.0));
  const int left = static_cast<int>(std::lround((rw - cw) / 2.0));
  CropBox b;
  b.x = static_cast<int>(std::lround(left / s));
  b.y = static_cast<int>(std::lround(top / s));
  b.w = std::max(1, std::min(width - b.x, static_cast<int>(std::lround(cw / s))));
  b.h = std::max(1, std::min(height - b.y, static_cast<int>(std::lround(ch / s))));
  return b;
}

CropBox scale_box(const CropBox& box, ScalingFactor scale, int scaled_width, int scaled_height) {
  if (scale.num == scale.denom) return box;
  CropBox b;
  b.x = std::min(scaled_width - 1, box.x * scale.num / scale.denom);
  b.y = std::min(scaled_height - 1, box.y * scale.num / scale.denom);
  b.w = std::max(1, std::min(scaled_width - b.x, box.w * scale.num / scale.denom));
  b.h = std::max(1, std::min(scaled_height - b.y, box.h * scale.num / scale.denom));
  return b;
}

void resize_crop(const std::uint8_t* src, int width, int height, int channels, const CropBox& box, int out_w,
                 int out_h, std::uint8_t* dst) {
  const int type = channels == 1 ? CV_8UC1 : CV_8UC3;
  const cv::Mat image(height, width, type, const_cast<std::uint8_t*>(src));
  cv::Mat out(out_h, out_w, type, dst);
  const cv::Mat roi = image(cv::Rect(box.x, box.y, box.w, box.h));
  if (box.w == out_w && box.h == out_h) {
    roi.copyTo(out);
  } else {
    cv::resize(roi, out, cv::Size(out_w, out_h), 0, 0, cv::INTER_LINEAR);
  }
}

void collate_chw_float(const std::uint8_t* hwc, int width, int height, int channels, bool flip, const Normalize& norm,
                       float* dst) {
  float a[3], b[3];
  for (int c = 0; c < channels; ++c) {
    a[c] = 1.0f / (255.0f * norm.std[c]);
    b[c] = -norm.mean[c] / norm.std[c];
  }
  const std::size_t plane = static_cast<std::size_t>(width) * height;
  for (int y = 0; y < height; ++y) {
    const std::uint8_t* row = hwc + static_cast<std::size_t>(y) * width * channels;
    for (int c = 0; c < channels; ++c) {
      float* out = dst + c * plane + static_cast<std::size_t>(y) * width;
      const float ac = a[c], bc = b[c];
      if (flip) {
        for (int x = 0; x < width; ++x) out[x] = row[(width - 1 - x) * channels + c] * ac + bc;
      } else {
        for (int x = 0; x < width; ++x) out[x] = row[x * channels + c] * ac + bc;
      }
    }
  }
}

void collate_chw_uint8(const std::uint8_t* hwc, int width, int height, int channels, bool flip, std::uint8_t* dst) {
  const std::size_t plane = static_cast<std::size_t>(width) * height;
  for (int y = 0; y < height; ++y) {
    const std::uint8_t* row = hwc + static_cast<std::size_t>(y) * width * channels;
    for (int c = 0; c < channels; ++c) {
      std::uint8_t* out = dst + c * plane + static_cast<std::size_t>(y) * width;
      for (int x = 0; x < width; ++x) out[x] = row[(flip ? width - 1 - x : x) * channels + c];
    }
  }
}

}  // namespace mlbench::pipeline
