// JPEG decoding with libjpeg-turbo's TurboJPEG API, at a DCT-domain scale
// (1/8 .. 1) chosen so that the decoded crop still covers the output size:
// decoding a 500x375 image at 1/2 costs about a third of a full decode.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace mlbench::pipeline {

class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ScalingFactor {
  int num = 1;
  int denom = 1;
  // ceil(size * num / denom), as TurboJPEG's TJSCALED.
  int scaled(int size) const { return (size * num + denom - 1) / denom; }
};

// An interleaved RGB image.
struct Image {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> pixels;  // width * height * 3
};

// The scale among `factors` with the fewest decoded pixels such that a crop of
// crop_w x crop_h source pixels, scaled, is still >= out_w x out_h (no
// upsampling introduced by the decoder). Falls back to 1/1. Pure.
ScalingFactor choose_scale(const std::vector<ScalingFactor>& factors, int crop_w, int crop_h, int out_w, int out_h);

// One per worker thread (a TurboJPEG handle is not thread-safe).
class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Width and height from the header; throws DecodeError.
  void header(const std::uint8_t* data, std::size_t size, int& width, int& height);
  // Decodes to RGB at `scale`; a corrupt or truncated stream throws DecodeError
  // (warnings are errors: TJFLAG_STOPONWARNING).
  void decode(const std::uint8_t* data, std::size_t size, ScalingFactor scale, Image& out);

  // The scaling factors this libjpeg-turbo supports (tjGetScalingFactors).
  static const std::vector<ScalingFactor>& scaling_factors();

 private:
  void* handle_;
};

}  // namespace mlbench::pipeline
