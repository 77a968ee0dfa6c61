#include "benchmarks/support/gpu_decode.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include <fmt/format.h>

#include "core/nvtx.h"

namespace mlbench::bench {

namespace fs = std::filesystem;

torch::Tensor crop_resize_normalize(const torch::Tensor& canvas, const std::vector<pipeline::EncodedSample>& samples,
                                    int size, const pipeline::Normalize& normalize) {
  const auto n = static_cast<std::int64_t>(samples.size());
  if (canvas.dim() != 4 || canvas.size(0) != n || canvas.size(1) != 3) {
    throw std::invalid_argument("crop_resize_normalize: the canvas must be [N, 3, H, W] for N samples");
  }
  const double H = static_cast<double>(canvas.size(2)), W = static_cast<double>(canvas.size(3));
  // Per sample: x0, w, y0, h, flip.
  auto params = torch::empty({n, 5}, torch::kFloat32);
  float* p = params.data_ptr<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& s = samples[static_cast<std::size_t>(i)];
    p[5 * i + 0] = static_cast<float>(s.box.x);
    p[5 * i + 1] = static_cast<float>(s.box.w);
    p[5 * i + 2] = static_cast<float>(s.box.y);
    p[5 * i + 3] = static_cast<float>(s.box.h);
    p[5 * i + 4] = s.flip ? 1.0f : 0.0f;
  }
  const torch::Device device = canvas.device();
  if (device.is_cuda()) params = params.pin_memory();
  params = params.to(device, /*non_blocking=*/true);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  // Output pixel j's centre in the box, as cv::resize INTER_LINEAR maps it: x0 + (j + 0.5) w / size - 0.5,
  // kept inside the box (cv::resize on the box's view repeats its edge pixels).
  const auto centres = (torch::arange(size, f32) + 0.5) / size;  // [size]
  auto axis = [&](int first, int extent) {
    const auto x0 = params.select(1, first).unsqueeze(1);  // [n, 1]
    const auto w = params.select(1, extent).unsqueeze(1);  // [n, 1]
    auto x = x0 + centres.unsqueeze(0) * w - 0.5;          // [n, size]
    return torch::minimum(torch::maximum(x, x0), x0 + w - 1);
  };
  auto xs = axis(0, 1);
  const auto ys = axis(2, 3);
  const auto flip = params.select(1, 4).unsqueeze(1) > 0.5;  // [n, 1]
  xs = torch::where(flip, xs.flip({1}), xs);
  // grid_sample's normalised coordinates (align_corners=false): pixel x -> (2x + 1) / W - 1.
  const auto gx = ((2 * xs + 1) / W - 1).unsqueeze(1).expand({n, size, size});
  const auto gy = ((2 * ys + 1) / H - 1).unsqueeze(2).expand({n, size, size});
  const auto grid = torch::stack({gx, gy}, 3);
  namespace F = torch::nn::functional;
  auto out = F::grid_sample(
      canvas.to(torch::kFloat32), grid,
      F::GridSampleFuncOptions().mode(torch::kBilinear).padding_mode(torch::kBorder).align_corners(false));
  out = out.round_().clamp_(0, 255);
  const auto mean = torch::tensor({normalize.mean[0], normalize.mean[1], normalize.mean[2]}, f32).view({1, 3, 1, 1});
  const auto std = torch::tensor({normalize.std[0], normalize.std[1], normalize.std[2]}, f32).view({1, 3, 1, 1});
  return (out / 255.0 - mean) / std;
}

namespace {

// nvJPEG's C API, as its header declares it (the enums are ints; handles are opaque pointers).
using Handle = void*;
using State = void*;
struct NvImage {
  unsigned char* channel[4];
  std::size_t pitch[4];
};
constexpr int kBackendHybrid = 1, kBackendGpuHybrid = 2, kBackendHardware = 3;
constexpr int kOutputRgb = 3;  // planar RGB

struct Api {
  void* lib = nullptr;
  std::string path;
  int (*create_ex)(int, void*, void*, unsigned, Handle*) = nullptr;
  int (*destroy)(Handle) = nullptr;
  int (*state_create)(Handle, State*) = nullptr;
  int (*state_destroy)(State) = nullptr;
  int (*batched_initialize)(Handle, State, int, int, int) = nullptr;
  int (*decode_batched)(Handle, State, const unsigned char* const*, const std::size_t*, NvImage*, void*) = nullptr;
  int (*decode)(Handle, State, const unsigned char*, std::size_t, int, NvImage*, void*) = nullptr;
  int (*get_property)(int, int*) = nullptr;
};

const char* status_name(int s) {
  static const char* names[] = {"success",
                                "not initialized",
                                "invalid parameter",
                                "bad JPEG",
                                "JPEG not supported",
                                "allocator failure",
                                "execution failed",
                                "architecture mismatch",
                                "internal error",
                                "implementation not supported",
                                "incomplete bitstream"};
  return s >= 0 && s < static_cast<int>(std::size(names)) ? names[s] : "unknown status";
}

const char* backend_name(int b) {
  return b == kBackendHardware ? "hardware" : b == kBackendGpuHybrid ? "gpu-hybrid" : "hybrid";
}
const char* huffman_where(int b) {
  return b == kBackendHardware    ? "the GPU's JPEG engine"
         : b == kBackendGpuHybrid ? "the GPU"
                                  : "the consumer's CPU thread";
}

// The folder of a loaded LibTorch CUDA library (torch/lib of a CUDA PyTorch), or "".
std::string torch_cuda_lib_dir() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        for (const char* lib : {"libc10_cuda.so", "libtorch_cuda.so"}) {
          if (name.find(lib) != std::string::npos) {
            *static_cast<std::string*>(out) = fs::path(name).parent_path().string();
            return 1;
          }
        }
        return 0;
      },
      &found);
  return found;
}

Api load_api() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("MLBENCH_NVJPEG"); env && *env) {
    candidates.emplace_back(env);
  } else {
    for (const char* soname : {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so.11", "libnvjpeg.so"}) {
      candidates.emplace_back(soname);
    }
    std::vector<fs::path> dirs;
    if (const std::string torch_lib = torch_cuda_lib_dir(); !torch_lib.empty()) {
      const fs::path site = fs::path(torch_lib) / ".." / "..";
      for (const char* sub : {"nvidia/nvjpeg/lib", "nvidia/cu13/lib", "nvidia/cu12/lib", "torchvision.libs"}) {
        dirs.push_back(site / sub);
      }
    }
    for (const char* d : {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
                          "/usr/local/cuda/targets/sbsa-linux/lib"}) {
      dirs.emplace_back(d);
    }
    for (const auto& d : dirs) {
      std::error_code ec;
      if (!fs::is_directory(d, ec)) continue;
      std::vector<std::string> here;
      for (const auto& e : fs::directory_iterator(d, ec)) {
        const std::string f = e.path().filename().string();
        if (f.rfind("libnvjpeg", 0) == 0 && f.find(".so") != std::string::npos) here.push_back(e.path().string());
      }
      std::sort(here.rbegin(), here.rend());  // the newest soname first
      candidates.insert(candidates.end(), here.begin(), here.end());
    }
  }
  Api api;
  std::string errors;
  for (const auto& c : candidates) {
    api.lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.lib) {
      api.path = c;
      break;
    }
    if (errors.size() < 400) errors += (errors.empty() ? "" : "; ") + c;
  }
  if (!api.lib) {
    throw std::runtime_error("--decode gpu: nvJPEG not found (tried " + errors +
                             "); install the CUDA toolkit's libnvjpeg or set MLBENCH_NVJPEG=/path/to/libnvjpeg.so");
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api.lib, name));
    if (!fn) throw std::runtime_error(fmt::format("--decode gpu: {} has no {}", api.path, name));
  };
  sym(api.create_ex, "nvjpegCreateEx");
  sym(api.destroy, "nvjpegDestroy");
  sym(api.state_create, "nvjpegJpegStateCreate");
  sym(api.state_destroy, "nvjpegJpegStateDestroy");
  sym(api.batched_initialize, "nvjpegDecodeBatchedInitialize");
  sym(api.decode_batched, "nvjpegDecodeBatched");
  sym(api.decode, "nvjpegDecode");
  sym(api.get_property, "nvjpegGetProperty");
  return api;
}

using Clock = std::chrono::steady_clock;

}  // namespace

struct GpuJpegDecoder::Impl {
  torch::Device device;
  int size;
  pipeline::Normalize normalize;
  std::vector<int> backends;  // to try, in order
  std::size_t current = 0;    // index into backends
  Api api;
  Handle handle = nullptr;
  State state = nullptr;   // batched
  State single = nullptr;  // one image at a time (the fallback for a batch that fails)
  int initialized_n = -1;
  std::vector<std::string> fallbacks;
  long batches = 0, decoded = 0, corrupt = 0;  // decoded: images
  double host_s = 0;
  DeviceStopwatch device_time;
  int version[3] = {0, 0, 0};

  Impl(torch::Device d, int s, pipeline::Normalize nz, const std::string& backend)
      : device(d), size(s), normalize(nz), api(load_api()) {
    if (backend == "auto") {
      backends = {kBackendHardware, kBackendGpuHybrid, kBackendHybrid};
    } else {
      backends = {backend == "hardware"     ? kBackendHardware
                  : backend == "gpu-hybrid" ? kBackendGpuHybrid
                                            : kBackendHybrid};
    }
    for (int k = 0; k < 3; ++k) api.get_property(k, &version[k]);  // MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
  }
  ~Impl() {
    release();
    // The library stays loaded: CUDA may still call into it at exit.
  }
  void release() {
    if (state) api.state_destroy(state);
    if (single) api.state_destroy(single);
    if (handle) api.destroy(handle);
    state = single = handle = nullptr;
    initialized_n = -1;
  }
  // A handle of backends[current], or of the next one that the machine supports (auto).
  void open() {
    while (!handle) {
      if (current >= backends.size()) throw std::runtime_error("--decode gpu: " + fallbacks.back());
      const int b = backends[current];
      int s = api.create_ex(b, nullptr, nullptr, 0, &handle);
      if (s == 0) s = api.state_create(handle, &state);
      if (s == 0) s = api.state_create(handle, &single);
      if (s != 0) {
        release();
        fallbacks.push_back(fmt::format("nvJPEG's {} backend: {}", backend_name(b), status_name(s)));
        ++current;
      }
    }
  }
  void next_backend(const std::string& why) {
    fallbacks.push_back(fmt::format("nvJPEG's {} backend: {}", backend_name(backends[current]), why));
    release();
    ++current;
  }

  torch::Tensor decode(const std::vector<pipeline::EncodedSample>& samples) {
    const int n = static_cast<int>(samples.size());
    if (n == 0) throw std::invalid_argument("GpuJpegDecoder::decode: an empty batch");
    int h = 1, w = 1;
    for (const auto& s : samples) {
      h = std::max(h, s.height);
      w = std::max(w, s.width);
    }
    device_time.start();
    auto canvas = torch::empty({n, 3, h, w}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
    std::vector<const unsigned char*> data(static_cast<std::size_t>(n));
    std::vector<std::size_t> lengths(static_cast<std::size_t>(n));
    std::vector<NvImage> out(static_cast<std::size_t>(n));
    auto* base = canvas.data_ptr<std::uint8_t>();
    const std::size_t plane = static_cast<std::size_t>(h) * w;
    for (int i = 0; i < n; ++i) {
      const auto& s = samples[static_cast<std::size_t>(i)];
      data[i] = s.jpeg.data();
      lengths[i] = s.jpeg.size();
      for (int c = 0; c < 4; ++c) {
        out[i].channel[c] = c < 3 ? base + (static_cast<std::size_t>(i) * 3 + c) * plane : nullptr;
        out[i].pitch[c] = c < 3 ? static_cast<std::size_t>(w) : 0;
      }
    }
    void* stream = current_cuda_stream();
    const auto t0 = Clock::now();
    {
      core::nvtx::Range range("gpu decode");
      for (;;) {
        open();
        int s = 0;
        if (initialized_n != n) {
          s = api.batched_initialize(handle, state, n, 1, kOutputRgb);
          if (s == 0) initialized_n = n;
        }
        if (s == 0) s = api.decode_batched(handle, state, data.data(), lengths.data(), out.data(), stream);
        if (s == 0) break;
        if (current + 1 < backends.size()) {
          next_backend(fmt::format("a batch failed ({})", status_name(s)));
          continue;
        }
        // The last backend: one image at a time, so that one bad image costs only itself.
        initialized_n = -1;
        for (int i = 0; i < n; ++i) {
          NvImage one = out[i];
          if (api.decode(handle, single, data[i], lengths[i], kOutputRgb, &one, stream) != 0) {
            canvas[i].zero_();
            ++corrupt;
          }
        }
        break;
      }
    }
    host_s += std::chrono::duration<double>(Clock::now() - t0).count();
    torch::Tensor images;
    {
      core::nvtx::Range range("gpu augment");
      images = crop_resize_normalize(canvas, samples, size, normalize);
    }
    device_time.stop();
    ++batches;
    decoded += n;
    return images;
  }
};

GpuJpegDecoder::GpuJpegDecoder(torch::Device device, int image_size, pipeline::Normalize normalize,
                               std::string backend) {
  if (!device.is_cuda()) throw std::invalid_argument("--decode gpu needs a CUDA device (--cuda)");
  if (!built_with_cuda()) throw std::invalid_argument("--decode gpu needs a build with a CUDA LibTorch");
  impl_ = std::make_unique<Impl>(device, image_size, normalize, backend);
}

GpuJpegDecoder::~GpuJpegDecoder() = default;

torch::Tensor GpuJpegDecoder::decode(const std::vector<pipeline::EncodedSample>& samples) {
  return impl_->decode(samples);
}

const std::string& GpuJpegDecoder::library() const {
  return impl_->api.path;
}

nlohmann::json GpuJpegDecoder::to_json() {
  const Impl& m = *impl_;
  const int b = m.current < m.backends.size() ? m.backends[m.current] : m.backends.back();
  return {{"where", "gpu"},
          {"library", m.api.path},
          {"library_version", fmt::format("{}.{}.{}", m.version[0], m.version[1], m.version[2])},
          {"backend", backend_name(b)},
          {"huffman", huffman_where(b)},
          {"batches", m.batches},
          {"images", m.decoded},
          {"host_s", m.host_s},
          {"device_s", impl_->device_time.total_s()},
          {"corrupt_samples", m.corrupt},
          {"fallbacks", m.fallbacks}};
}

}  // namespace mlbench::bench
