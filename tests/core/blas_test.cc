// core/blas: which BLAS a /proc/PID/maps text shows, for every Debian variant.
#include "core/blas.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mlbench::core {
namespace {

std::string maps(const std::vector<std::string>& paths) {
  std::string text = "55d0c000-55d0d000 r--p 00000000 08:01 1 /usr/bin/wlm\n7f00-7f01 rw-p 00000000 00:00 0 \n";
  for (const std::string& p : paths) text += "7f97105b8000-7f97105ba000 r-xp 00002000 08:01 1234 " + p + "\n";
  return text + "7ffd-7ffe rw-p 00000000 00:00 0                          [stack]\n";
}

TEST(Blas, ReferenceFromDebianLibblas3) {
  const BlasInfo b = blas_from_maps(
      maps({"/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13", "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0",
            "/usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3.11.0"}));
  EXPECT_EQ(b.name, "reference");
  EXPECT_EQ(b.library, "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
  EXPECT_EQ(b.backend, b.library);
  EXPECT_EQ(b.threads, 1);
}

TEST(Blas, OpenblasVariantsNameTheBackend) {
  for (const std::string v : {"pthread", "openmp", "serial"}) {
    const std::string dir = "/usr/lib/x86_64-linux-gnu/openblas-" + v + "/";
    const BlasInfo b =
        blas_from_maps(maps({dir + "libblas.so.3", dir + "liblapack.so.3", dir + "libopenblasp-r0.3.21.so"}));
    EXPECT_EQ(b.name, "openblas-" + v);
    EXPECT_EQ(b.library, dir + "libblas.so.3");
    EXPECT_EQ(b.backend, dir + "libopenblasp-r0.3.21.so");
    EXPECT_EQ(b.threads, 0) << "the thread count comes from the library, not from the maps";
  }
}

TEST(Blas, BlisAndOthers) {
  EXPECT_EQ(blas_from_maps(maps({"/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3"})).name, "blis-openmp");
  EXPECT_EQ(blas_from_maps(maps({"/opt/intel/lib/libmkl_rt.so.2"})).name, "mkl");
  EXPECT_EQ(blas_from_maps(maps({"/opt/x/libopenblas.so.0"})).name, "openblas");
  EXPECT_EQ(blas_from_maps(maps({"/opt/x/libblas.so.3"})).name, "unknown");
}

TEST(Blas, NoneWhenNothingIsMapped) {
  const BlasInfo b =
      blas_from_maps(maps({"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/liblapack.so.3"}));
  EXPECT_EQ(b.name, "none");
  EXPECT_TRUE(b.library.empty());
  EXPECT_EQ(to_json(b)["name"], "none");
}

TEST(Blas, DeletedMappingKeepsItsPath) {
  const BlasInfo b = blas_from_maps(maps({"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0 (deleted)"}));
  EXPECT_EQ(b.library, "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
}

// This test binary links no BLAS: nothing to report, and setting threads is harmless.
TEST(Blas, LoadedBlasOfAProcessWithoutOne) {
  set_blas_threads(2);
  EXPECT_EQ(loaded_blas().name, "none");
}

}  // namespace
}  // namespace mlbench::core
