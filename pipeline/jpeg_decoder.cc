#include "pipeline/jpeg_decoder.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <string>

#include <turbojpeg.h>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

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

CropBox scale_box(const CropBox& box, ScalingFactor scale, int scaled_width, int scaled_height) {
  if (scale.num == scale.denom) return box;
  // Corners to the nearest scaled pixel edge (round half up): off by at most half a decoded pixel.
  const auto at = [&](int v) { return (2 * v * scale.num + scale.denom) / (2 * scale.denom); };
  CropBox b;
  b.x = std::min(scaled_width - 1, at(box.x));
  b.y = std::min(scaled_height - 1, at(box.y));
  b.w = std::max(1, std::min(scaled_width, at(box.x + box.w)) - b.x);
  b.h = std::max(1, std::min(scaled_height, at(box.y + box.h)) - b.y);
  return b;
}

bool has_end_of_image(const std::uint8_t* data, std::size_t size) {
  for (std::size_t i = size; i >= 2; --i) {
    if (data[i - 2] == 0xFF && data[i - 1] == 0xD9) return true;
  }
  return false;
}

// The libjpeg decompressor of one JpegDecoder, reused for every image (jpeg_abort_decompress between
// images keeps its allocations). Errors longjmp back to decode_region, which throws DecodeError:
// libjpeg is C, so a C++ exception must not unwind through it.
struct JpegDecoder::Libjpeg {
  struct ErrorManager {
    jpeg_error_mgr pub;
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
  };
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};

  static void error_exit(j_common_ptr c) {
    auto* e = reinterpret_cast<ErrorManager*>(c->err);
    (*c->err->format_message)(c, e->message);
    std::longjmp(e->jump, 1);
  }
  // Warnings (msg_level -1: corrupt entropy data, premature end of data) are errors, as with
  // TurboJPEG's TJFLAG_STOPONWARNING; trace messages (level >= 0) are ignored.
  static void emit_message(j_common_ptr c, int level) {
    if (level < 0) error_exit(c);
  }

  Libjpeg() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = error_exit;
    err.pub.emit_message = emit_message;
    jpeg_create_decompress(&cinfo);
  }
  ~Libjpeg() { jpeg_destroy_decompress(&cinfo); }

  enum class Result { Ok, Error, Unsupported };

  // Only trivially destructible locals between setjmp and any longjmp. On Ok, `region` is the
  // scaled box inside the decoded window and `chosen` what `plan` returned.
  Result decode(const std::uint8_t* data, std::size_t size, const PlanRef& plan, PixelFormat format, Image& out,
                CropBox& region, RegionPlan& chosen) {
    if (setjmp(err.jump)) {
      jpeg_abort_decompress(&cinfo);
      return Result::Error;
    }
    jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
    jpeg_read_header(&cinfo, TRUE);
    // The plan needs the size even for the CMYK fallback; it does not call into libjpeg.
    chosen = plan.call(plan.object, static_cast<int>(cinfo.image_width), static_cast<int>(cinfo.image_height));
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
      jpeg_abort_decompress(&cinfo);
      return Result::Unsupported;
    }
    // The entropy-coded data starts here; a stream cut short has no EOI marker after it.
    const std::size_t header_bytes = size - cinfo.src->bytes_in_buffer;
    if (!has_end_of_image(data + header_bytes, size - header_bytes)) {
      std::snprintf(err.message, sizeof err.message, "no end-of-image marker (truncated file)");
      jpeg_abort_decompress(&cinfo);
      return Result::Error;
    }
    const ScalingFactor scale = chosen.scale;
    cinfo.out_color_space = format == PixelFormat::Rgbx ? JCS_EXT_RGBX : JCS_RGB;
    cinfo.scale_num = static_cast<unsigned>(scale.num);
    cinfo.scale_denom = static_cast<unsigned>(scale.denom);
    jpeg_start_decompress(&cinfo);
    const int sw = static_cast<int>(cinfo.output_width), sh = static_cast<int>(cinfo.output_height);
    const CropBox s = scale_box(chosen.box, scale, sw, sh);
    JDIMENSION xoffset = static_cast<JDIMENSION>(s.x), width = static_cast<JDIMENSION>(s.w);
    if (s.w < sw) jpeg_crop_scanline(&cinfo, &xoffset, &width);  // widened to iMCU column boundaries
    if (s.y > 0 && jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(s.y)) != static_cast<JDIMENSION>(s.y)) {
      std::snprintf(err.message, sizeof err.message, "could not skip to row %d", s.y);
      jpeg_abort_decompress(&cinfo);
      return Result::Error;
    }
    out.width = static_cast<int>(cinfo.output_width);  // the cropped width after jpeg_crop_scanline
    out.height = s.h;
    out.channels = cinfo.output_components;  // 3, or 4 for RGBX
    out.pixels.resize(static_cast<std::size_t>(out.width) * out.height * out.channels);
    const std::size_t stride = static_cast<std::size_t>(out.width) * out.channels;
    while (static_cast<int>(cinfo.output_scanline) < s.y + s.h) {
      JSAMPROW row = out.pixels.data() + (cinfo.output_scanline - static_cast<JDIMENSION>(s.y)) * stride;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    // Rows below the window are never decoded.
    jpeg_abort_decompress(&cinfo);
    region = {s.x - static_cast<int>(xoffset), 0, s.w, s.h};
    return Result::Ok;
  }
};

JpegDecoder::JpegDecoder() : handle_(tjInitDecompress()), jpeg_(std::make_unique<Libjpeg>()) {
  if (!handle_) throw std::runtime_error("tjInitDecompress failed");
}

JpegDecoder::~JpegDecoder() { tjDestroy(handle_); }

CropBox JpegDecoder::decode_region(const std::uint8_t* data, std::size_t size, const CropBox& box, ScalingFactor scale,
                                   Image& out, PixelFormat format) {
  const auto fixed = [&](int, int) { return RegionPlan{box, scale}; };
  return decode_region(data, size, fixed, out, format);
}

CropBox JpegDecoder::decode_planned(const std::uint8_t* data, std::size_t size, const PlanRef& plan, Image& out,
                                    PixelFormat format, RegionPlan* planned) {
  CropBox region;
  RegionPlan chosen;
  const Libjpeg::Result result = jpeg_->decode(data, size, plan, format, out, region, chosen);
  if (result == Libjpeg::Result::Error) throw DecodeError(std::string("corrupt JPEG: ") + jpeg_->err.message);
  if (planned) *planned = chosen;
  if (result == Libjpeg::Result::Ok) return region;
  decode(data, size, chosen.scale, out, format);  // CMYK/YCCK: TurboJPEG converts them to RGB
  return scale_box(chosen.box, chosen.scale, out.width, out.height);
}

void JpegDecoder::header(const std::uint8_t* data, std::size_t size, int& width, int& height) {
  int subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(handle_, data, static_cast<unsigned long>(size), &width, &height, &subsamp, &colorspace) !=
      0) {
    throw DecodeError(std::string("not a JPEG: ") + tjGetErrorStr2(handle_));
  }
  if (width <= 0 || height <= 0) throw DecodeError("JPEG header has no size");
}

void JpegDecoder::decode(const std::uint8_t* data, std::size_t size, ScalingFactor scale, Image& out,
                         PixelFormat format) {
  int w = 0, h = 0;
  header(data, size, w, h);
  out.width = scale.scaled(w);
  out.height = scale.scaled(h);
  out.channels = format == PixelFormat::Rgbx ? 4 : 3;
  out.pixels.resize(static_cast<std::size_t>(out.width) * out.height * out.channels);
  if (tjDecompress2(handle_, data, static_cast<unsigned long>(size), out.pixels.data(), out.width, 0, out.height,
                    format == PixelFormat::Rgbx ? TJPF_RGBX : TJPF_RGB, TJFLAG_STOPONWARNING) != 0) {
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

const std::vector<ScalingFactor>& JpegDecoder::fast_scaling_factors() {
  static const std::vector<ScalingFactor> kFast = [] {
    std::vector<ScalingFactor> out;
    for (const ScalingFactor& f : scaling_factors()) {
      if (f.num == 1 && (f.denom == 1 || f.denom == 2 || f.denom == 4 || f.denom == 8)) out.push_back(f);
    }
    return out;
  }();
  return kFast;
}

}  // namespace mlbench::pipeline
