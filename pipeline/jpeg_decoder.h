// JPEG decoding with libjpeg-turbo, at a DCT-domain scale (1/8 .. 1) chosen so
// that the decoded crop still covers the output size (decoding a 500x375 image
// at 1/2 costs about a third of a full decode), and region-of-interest decode:
// only the crop window's rows and iMCU columns go through IDCT, upsampling and
// colour conversion, and nothing below the window is entropy-decoded (the
// libjpeg API's jpeg_crop_scanline / jpeg_skip_scanlines, which TurboJPEG 2.x
// does not expose). Full-image decode uses the TurboJPEG API.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <type_traits>
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

// A crop in pixels: columns [x, x+w), rows [y, y+h).
struct CropBox {
  int x = 0, y = 0, w = 0, h = 0;
  bool operator==(const CropBox&) const = default;
};

// The pixel layout a decode writes: RGB, or RGBX (4 bytes a pixel, the 4th
// unused). RGBX costs the decoder nothing (libjpeg-turbo's SIMD colour
// conversion writes either) and makes OpenCV's resize and flip faster: they
// have SIMD paths for 4-byte pixels and not for 3-byte ones (studies/results/2026-11-23-loader-real-photos.md).
enum class PixelFormat { Rgb, Rgbx };

// An interleaved image of `channels` bytes a pixel (3: RGB, 4: RGBX).
struct Image {
  int width = 0;
  int height = 0;
  int channels = 3;
  std::vector<std::uint8_t> pixels;  // width * height * channels
};

// What decode_region decodes once it knows the image's size: the crop `box`
// in source pixels (inside the image) and the DCT `scale`.
struct RegionPlan {
  CropBox box;
  ScalingFactor scale;
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
  // Decodes to RGB (or RGBX) at `scale`; a corrupt or truncated stream throws
  // DecodeError (warnings are errors: TJFLAG_STOPONWARNING).
  void decode(const std::uint8_t* data, std::size_t size, ScalingFactor scale, Image& out,
              PixelFormat format = PixelFormat::Rgb);

  // Region-of-interest decode: decodes at `scale` only the part of the image
  // that holds `box` (source pixels, inside the image). The box is first
  // mapped to scaled pixels exactly as scale_box() does, then
  // jpeg_crop_scanline widens it to iMCU column boundaries, rows above it are
  // skipped (entropy-decoded only: jpeg_skip_scanlines) and rows below it are
  // never read. `out` receives the decoded window (RGB) and the return value is
  // the scaled box inside `out`. The result equals, up to chroma-upsampling
  // rounding at the window's left/right edges, decode(scale) followed by
  // scale_box(). Corrupt data in the rows read, a libjpeg warning (warnings are
  // errors, like TJFLAG_STOPONWARNING) or a stream without its end-of-image
  // marker (a truncated file, even when the window lies in the intact part)
  // throws DecodeError. Corrupt entropy data below the window is not seen.
  // CMYK/YCCK JPEGs (no RGB conversion in libjpeg) fall back to a full decode.
  CropBox decode_region(const std::uint8_t* data, std::size_t size, const CropBox& box, ScalingFactor scale, Image& out,
                        PixelFormat format = PixelFormat::Rgb);
  // The same, with the box and scale chosen by `plan(width, height)` from the
  // header this decode reads anyway (no second header parse, as header() then
  // decode_region() would cost: ~2% of a small photo's decode). `plan` is
  // called once, before any pixel is decoded, unless the header is corrupt.
  // `planned`, when not null, receives what it returned.
  template <class Plan>
  CropBox decode_region(const std::uint8_t* data, std::size_t size, Plan&& plan, Image& out,
                        PixelFormat format = PixelFormat::Rgb, RegionPlan* planned = nullptr) {
    using P = std::remove_reference_t<Plan>;
    const PlanRef ref{const_cast<void*>(static_cast<const void*>(&plan)),
                      [](void* p, int w, int h) -> RegionPlan { return (*static_cast<P*>(p))(w, h); }};
    return decode_planned(data, size, ref, out, format, planned);
  }

  // The scaling factors this libjpeg-turbo supports (tjGetScalingFactors).
  static const std::vector<ScalingFactor>& scaling_factors();
  // Those of them whose IDCT libjpeg-turbo runs with SIMD on x86 (1/1, 1/2, 1/4, 1/8: the 8x8,
  // 4x4, 2x2 and 1x1 IDCTs). The others (7/8, 3/4, 5/8, 3/8 ...) use scalar C IDCTs, and measured
  // no faster than a 1/1 region decode (studies/results/2026-11-23-loader-real-photos.md), so the loader picks from these.
  static const std::vector<ScalingFactor>& fast_scaling_factors();

 private:
  // A non-owning view of the caller's plan (no std::function: no allocation per image).
  struct PlanRef {
    void* object;
    RegionPlan (*call)(void*, int, int);
  };
  CropBox decode_planned(const std::uint8_t* data, std::size_t size, const PlanRef& plan, Image& out,
                         PixelFormat format, RegionPlan* planned);

  struct Libjpeg;
  void* handle_;
  std::unique_ptr<Libjpeg> jpeg_;
};

// The box in an image decoded at `scale` (scaled_width x scaled_height), kept
// inside it: each corner scaled and rounded to the nearest pixel edge. The
// resize then starts from whole decoded pixels: the box is off its exact
// position by at most half a decoded pixel per edge (<= 1/scale / 2 source px).
CropBox scale_box(const CropBox& box, ScalingFactor scale, int scaled_width, int scaled_height);

// True when the last bytes of a JPEG stream (trailing padding allowed) hold
// its end-of-image marker FF D9. In entropy-coded data FF is always followed
// by 00 or a restart marker, so a truncated stream fails this check. Pure.
bool has_end_of_image(const std::uint8_t* data, std::size_t size);

}  // namespace mlbench::pipeline
