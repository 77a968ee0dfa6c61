// Which BLAS this process runs and with how many threads. Debian's LibTorch is built
// with BLAS_INFO=generic: it calls whatever libblas.so.3 the alternatives system (or
// LD_LIBRARY_PATH) resolves, and the reference BLAS is 20x slower than OpenBLAS on a
// Linear layer, so every report must say which one ran (docs/report-format.md).
// Read from the process's own mappings, not from the alternatives link: that is what
// was loaded. No LibTorch: the thread calls are looked up by name (dlsym).
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace mlbench::core {

struct BlasInfo {
  // "openblas-pthread", "openblas-openmp", "openblas-serial", "openblas", "blis-pthread",
  // "blis-openmp", "blis-serial", "blis", "mkl", "reference", "unknown" (a libblas.so of
  // no known family), or "none" (no BLAS mapped).
  std::string name = "none";
  std::string library;  // resolved path of the mapped libblas.so* ("" when none)
  std::string backend;  // resolved path of the library doing the work (libopenblas*, libblis*, ...)
  int threads = 0;      // the library's own thread count; 1 for the reference BLAS; 0 unknown
};

// The family of a BLAS from its resolved path (pure; see BlasInfo::name).
std::string blas_name(const std::string& path);

// The BLAS among the mappings of a /proc/PID/maps text (pure; threads left 0).
BlasInfo blas_from_maps(const std::string& maps_text);

// This process's BLAS: /proc/self/maps plus the library's thread count when it exports
// one (openblas_get_num_threads, bli_thread_get_num_threads).
BlasInfo loaded_blas();

// Sets the BLAS's own thread count when it has one (OpenBLAS, BLIS); a no-op for the
// reference BLAS. LibTorch's set_num_threads only sets OpenMP's (and MKL's), so a
// pthread OpenBLAS would otherwise use every CPU of its affinity, whatever --cpu-cores says.
void set_blas_threads(int threads);

// {"name", "library", "backend", "threads"}
nlohmann::json to_json(const BlasInfo& blas);

}  // namespace mlbench::core
