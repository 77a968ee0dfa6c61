#include "pipeline/transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

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

void resize_crop(const std::uint8_t* src, int width, int height, int channels, const CropBox& box, int out_w,
                 int out_h, std::uint8_t* dst) {
  const int type = CV_8UC(channels);
  const cv::Mat image(height, width, type, const_cast<std::uint8_t*>(src));
  cv::Mat out(out_h, out_w, type, dst);
  const cv::Mat roi = image(cv::Rect(box.x, box.y, box.w, box.h));
  if (box.w == out_w && box.h == out_h) {
    roi.copyTo(out);
  } else {
    cv::resize(roi, out, cv::Size(out_w, out_h), 0, 0, cv::INTER_LINEAR);
  }
}

namespace {

// The sample mirrored left-right when `flip` (cv::flip, SIMD; into a per-thread scratch buffer),
// else the input itself.
cv::Mat maybe_flipped(const std::uint8_t* hwc, int width, int height, int channels, bool flip) {
  const cv::Mat src(height, width, CV_8UC(channels), const_cast<std::uint8_t*>(hwc));
  if (!flip) return src;
  thread_local cv::Mat flipped;
  cv::flip(src, flipped, 1);  // reallocates only when the shape changes
  return flipped;
}

}  // namespace

// Both collates run as SIMD passes over 224x224 samples instead of one scalar loop that reads
// with a stride of 3: flip (uint8, when drawn), de-interleave into planes (cv::split), and for
// float32 one fused multiply-add per plane (convertTo: x * 1/(255 std) - mean/std), which is
// Normalize(ToTensor(x)) in one rounding step. An RGBX source (src_channels 4) splits into four
// planes, the 4th into scratch.
void collate_chw_float(const std::uint8_t* hwc, int width, int height, int channels, bool flip, const Normalize& norm,
                       float* dst, int src_channels) {
  if (src_channels == 0) src_channels = channels;
  const cv::Mat src = maybe_flipped(hwc, width, height, src_channels, flip);
  const std::size_t plane = static_cast<std::size_t>(width) * height;
  if (src_channels == 1) {
    cv::Mat out(height, width, CV_32F, dst);
    src.convertTo(out, CV_32F, 1.0 / (255.0 * norm.std[0]), -norm.mean[0] / norm.std[0]);
    return;
  }
  thread_local cv::Mat planes[4];
  cv::split(src, planes);
  for (int c = 0; c < channels; ++c) {
    cv::Mat out(height, width, CV_32F, dst + c * plane);
    planes[c].convertTo(out, CV_32F, 1.0 / (255.0 * norm.std[c]), -static_cast<double>(norm.mean[c]) / norm.std[c]);
  }
}

void collate_chw_uint8(const std::uint8_t* hwc, int width, int height, int channels, bool flip, std::uint8_t* dst,
                       int src_channels) {
  if (src_channels == 0) src_channels = channels;
  const cv::Mat src = maybe_flipped(hwc, width, height, src_channels, flip);
  const std::size_t plane = static_cast<std::size_t>(width) * height;
  std::vector<cv::Mat> planes;
  for (int c = 0; c < channels; ++c) planes.emplace_back(height, width, CV_8U, dst + c * plane);
  thread_local cv::Mat unused;  // an RGBX source's 4th plane
  if (src_channels > channels) {
    unused.create(height, width, CV_8U);
    planes.push_back(unused);
  }
  cv::split(src, planes);  // writes into the batch (the Mats already have the right shape)
}

}  // namespace mlbench::pipeline
