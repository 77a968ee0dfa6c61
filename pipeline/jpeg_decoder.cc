#include "pipeline/jpeg_decoder.h"

#include <turbojpeg.h>

#include <string>

namespace mlbench::pipeline {

ScalingFactor choose_scale(const std::vector<ScalingFactor>& factors, int crop_w, int crop_h, int out_w, int out_h) {
  ScalingFactor best{1, 1};
  double best_ratio = 1.0;
  for (const ScalingFactor& f : factors) {
    const double ratio = static_cast<double>(f.num) / f.denom;
    if (ratio > 1.0 || ratio >= best_ratio) continue;
    // The crop in scaled pixels, rounded down (the crop box is cut inside the scaled image).
    const int w = static_cast<int>(crop_w * ratio);
    const int h = static_cast<int>(crop_h * ratio);
    if (w >= out_w && h >= out_h) {
      best = f;
      best_ratio = ratio;
    }
  }
  return best;
}

JpegDecoder::JpegDecoder() : handle_(tjInitDecompress()) {
  if (!handle_) throw std::runtime_error("tjInitDecompress failed");
}

JpegDecoder::~JpegDecoder() { tjDestroy(handle_); }

void JpegDecoder::header(const std::uint8_t* data, std::size_t size, int& width, int& height) {
  int subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(handle_, data, static_cast<unsigned long>(size), &width, &height, &subsamp, &colorspace) !=
      0) {
    throw DecodeError(std::string("not a JPEG: ") + tjGetErrorStr2(handle_));
  }
  if (width <= 0 || height <= 0) throw DecodeError("JPEG header has no size");
}

void JpegDecoder::decode(const std::uint8_t* data, std::size_t size, ScalingFactor scale, Image& out) {
  int w = 0, h = 0;
  header(data, size, w, h);
  out.width = scale.scaled(w);
  out.height = scale.scaled(h);
  out.pixels.resize(static_cast<std::size_t>(out.width) * out.height * 3);
  if (tjDecompress2(handle_, data, static_cast<unsigned long>(size), out.pixels.data(), out.width, 0, out.height,
                    TJPF_RGB, TJFLAG_STOPONWARNING) != 0) {
    throw DecodeError(std::string("corrupt JPEG: ") + tjGetErrorStr2(handle_));
  }
}

const std::vector<ScalingFactor>& JpegDecoder::scaling_factors() {
  static const std::vector<ScalingFactor> kFactors = [] {
    int n = 0;
    tjscalingfactor* f = tjGetScalingFactors(&n);
    std::vector<ScalingFactor> out;
    for (int i = 0; f && i < n; ++i) out.push_back({f[i].num, f[i].denom});
    return out;
  }();
  return kFactors;
}

}  // namespace mlbench::pipeline
