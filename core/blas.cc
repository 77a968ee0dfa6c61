#include "blas.h"

#include <dlfcn.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {
std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

// "-pthread" / "-openmp" / "-serial" from Debian's per-variant folders (openblas-pthread/...).
std::string variant(const std::string& path, const std::string& family) {
  for (const char* v : {"pthread", "openmp", "serial"}) {
    if (contains(path, ("/" + family + "-" + v + "/").c_str())) return family + "-" + v;
  }
  return family;
}

bool is_blas_interface(const std::string& base) {
  return starts_with(base, "libblas.so") || starts_with(base, "libcblas.so");
}

bool is_backend(const std::string& base) {
  return starts_with(base, "libopenblas") || starts_with(base, "libblis") || starts_with(base, "libmkl_rt") ||
         starts_with(base, "libmkl_core");
}
}  // namespace

std::string blas_name(const std::string& path) {
  const std::string base = base_name(path);
  if (starts_with(base, "libopenblas") || contains(path, "/openblas")) return variant(path, "openblas");
  if (starts_with(base, "libblis") || contains(path, "/blis")) return variant(path, "blis");
  if (starts_with(base, "libmkl")) return "mkl";
  // Debian's reference BLAS (libblas3) lives in .../blas/libblas.so.3.x.y.
  if (contains(path, "/blas/") && starts_with(base, "libblas.so")) return "reference";
  return is_blas_interface(base) ? "unknown" : "none";
}

BlasInfo blas_from_maps(const std::string& maps_text) {
  BlasInfo info;
  std::istringstream in(maps_text);
  for (std::string line; std::getline(in, line);) {
    // address perms offset dev inode path: the path is the first '/' after the inode.
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (const auto deleted = path.find(" (deleted)"); deleted != std::string::npos) path.resize(deleted);
    const std::string base = base_name(path);
    if (info.library.empty() && is_blas_interface(base)) info.library = path;
    if (info.backend.empty() && is_backend(base)) info.backend = path;
  }
  if (info.library.empty() && info.backend.empty()) return info;
  if (info.backend.empty()) info.backend = info.library;
  info.name = blas_name(info.backend);
  if (info.name == "none") info.name = "unknown";
  if (info.name == "reference") info.threads = 1;
  return info;
}

BlasInfo loaded_blas() {
  std::ifstream in("/proc/self/maps");
  std::stringstream text;
  text << in.rdbuf();
  BlasInfo info = blas_from_maps(text.str());
  if (auto* get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))) {
    info.threads = get();
  } else if (auto* bli = reinterpret_cast<long (*)()>(dlsym(RTLD_DEFAULT, "bli_thread_get_num_threads"))) {
    info.threads = static_cast<int>(bli());
  }
  return info;
}

void set_blas_threads(int threads) {
  if (threads < 1) return;
  if (auto* set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
  if (auto* bli = reinterpret_cast<void (*)(long)>(dlsym(RTLD_DEFAULT, "bli_thread_set_num_threads"))) bli(threads);
}

nlohmann::json to_json(const BlasInfo& blas) {
  return {{"name", blas.name}, {"library", blas.library}, {"backend", blas.backend}, {"threads", blas.threads}};
}

}  // namespace mlbench::core
