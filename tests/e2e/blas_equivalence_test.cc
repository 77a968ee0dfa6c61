// End-to-end: an optimised BLAS must not change what is computed. A few benchmarks
// train for a fixed number of steps with a fixed seed, once on Debian's reference
// BLAS and once on an optimised one (chosen per run with LD_LIBRARY_PATH, as the
// dynamic loader resolves libblas.so.3 there first), and their losses must agree
// within a floating-point tolerance; the reports' machine.blas must show that the
// two runs really used different libraries.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/bench_run.h"
#include "tests/support/temp_dir.h"

namespace {
namespace fs = std::filesystem;
using mlbench::testing_support::run_bench;
using mlbench::testing_support::TempDir;

const fs::path kLibDir = fs::path("/usr/lib") / MLBENCH_LIBRARY_ARCHITECTURE;

// Reordered float32 sums (blocked GEMM kernels against the reference triple loop)
// differ by ~1e-7 relative per product; over these few SGD/Adam steps the losses
// measured here differ by < 1e-5 relative. 1e-3 leaves room for other CPUs' kernels
// while a wrong product (a transposed or dropped term) moves the loss by far more.
constexpr double kRelTolerance = 1e-3;
constexpr double kAbsTolerance = 1e-6;

// The first optimised BLAS installed, by its Debian folder.
std::string optimised_blas_dir() {
  for (const char* d : {"openblas-openmp", "openblas-pthread", "blis-openmp", "blis-pthread", "openblas-serial"}) {
    if (fs::exists(kLibDir / d / "libblas.so.3")) return (kLibDir / d).string();
  }
  return "";
}

struct Losses {
  std::vector<double> epoch;
  std::vector<double> batch;
  std::string blas;
};

Losses train(const std::string& bin, const std::string& args, const std::string& lib_path, const std::string& tag) {
  const TempDir tmp("blas_eq_" + tag);
  const fs::path dir = tmp.path();
  const auto r = run_bench(fmt::format("LD_LIBRARY_PATH={} {} {} --seed 7 --cpu-cores 1 --report {}", lib_path, bin,
                                       args, (dir / "reports").string()),
                           dir / "reports", dir / "log.txt");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  Losses l;
  if (r.reports.size() != 1) {
    ADD_FAILURE() << tag << ": expected one report, got " << r.reports.size() << "\n" << r.output;
    return l;
  }
  const nlohmann::json& j = r.reports[0];
  for (const auto& v : j["epoch_loss"]) l.epoch.push_back(v.is_number() ? v.get<double>() : NAN);
  for (const auto& v : j["batch_loss"]) l.batch.push_back(v.is_number() ? v.get<double>() : NAN);
  l.blas = j["machine"]["blas"]["name"].get<std::string>();
  return l;
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i])) << what << "[" << i << "]";
    EXPECT_LE(std::abs(a[i] - b[i]), kAbsTolerance + kRelTolerance * std::abs(b[i]))
        << what << "[" << i << "]: optimised " << a[i] << ", reference " << b[i];
  }
}

struct Case {
  const char* name;
  const char* bin;
  const char* args;
};

class BlasEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(BlasEquivalence, SameLossesAsTheReferenceBlas) {
  const std::string reference = (kLibDir / "blas").string() + ":" + (kLibDir / "lapack").string();
  if (!fs::exists(kLibDir / "blas" / "libblas.so.3")) {
    GTEST_SKIP() << "the reference BLAS (Debian package libblas3) is not installed: " << (kLibDir / "blas")
                 << " has no libblas.so.3";
  }
  const std::string optimised = optimised_blas_dir();
  if (optimised.empty()) {
    GTEST_SKIP() << "no optimised BLAS installed (libopenblas0-openmp/-pthread, libblis4-*) under " << kLibDir;
  }
  const Case c = GetParam();
  const Losses ref = train(c.bin, c.args, reference, std::string(c.name) + "_ref");
  const Losses opt = train(c.bin, c.args, optimised, std::string(c.name) + "_opt");
  EXPECT_EQ(ref.blas, "reference") << "LD_LIBRARY_PATH=" << reference << " did not load the reference BLAS";
  EXPECT_NE(opt.blas, "reference") << "LD_LIBRARY_PATH=" << optimised << " did not load an optimised BLAS";
  EXPECT_NE(opt.blas.find(fs::path(optimised).filename().string().substr(0, 4)), std::string::npos)
      << "report says " << opt.blas << " for " << optimised;
  expect_close(opt.epoch, ref.epoch, std::string(c.name) + " epoch_loss");
  expect_close(opt.batch, ref.batch, std::string(c.name) + " batch_loss");
}

// A pthread OpenBLAS keeps its own pool, sized from the CPUs it may run on, which
// torch::set_num_threads does not touch: before the benchmarks set the BLAS's threads
// from --cpu-cores, a 1-CPU instance on a 2-CPU affinity ran 2 BLAS threads.
TEST(BlasThreads, PthreadOpenblasFollowsCpuCores) {
  const fs::path dir = kLibDir / "openblas-pthread";
  if (!fs::exists(dir / "libblas.so.3")) {
    GTEST_SKIP() << "libopenblas0-pthread is not installed: " << dir << " has no libblas.so.3";
  }
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs to tell 1 BLAS thread from the default";
  for (int cores : {1, 2}) {
    const TempDir tmp("blas_threads");
    // Without OPENBLAS_NUM_THREADS the pool starts at every CPU: only --cpu-cores may size it.
    const auto r = run_bench(fmt::format("env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS LD_LIBRARY_PATH={} {} "
                                         "--batch-size 16 --repeat 2 --number 2 --cpu-cores {} --report {}",
                                         dir.string(), TOY_REG_BIN, cores, (tmp.path() / "r").string()),
                             tmp.path() / "r", tmp.path() / "log.txt");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_EQ(r.reports.size(), 1u) << r.output;
    const nlohmann::json& blas = r.reports[0]["machine"]["blas"];
    EXPECT_EQ(blas["name"], "openblas-pthread") << blas.dump();
    EXPECT_EQ(blas["threads"], cores) << "--cpu-cores " << cores << ": " << blas.dump();
  }
}

// Tiny settings: each run takes well under a second of compute even on the reference BLAS.
INSTANTIATE_TEST_SUITE_P(
    Benchmarks, BlasEquivalence,
    ::testing::Values(
        Case{"toy_reg", TOY_REG_BIN, "--batch-size 64 --repeat 4 --number 10 --warmup 1"},
        Case{"toy_lstm", TOY_LSTM_BIN, "--batch-size 4 --length 40 --hidden 24 --repeat 3 --number 2 --warmup 1"},
        Case{"vae", VAE_BIN, "--synthetic --batch-size 32 --repeat 3 --number 4 --warmup 1"},
        Case{"wlm", WLM_BIN,
             "--synthetic --batch-size 4 --emsize 32 --nhid 32 --bptt 8 --repeat 3 --number 4 --warmup 1"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
