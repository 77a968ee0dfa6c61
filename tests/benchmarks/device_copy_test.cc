// benchmarks/support/device_copy: the side-stream copies and the CUDA event
// timeline. The GPU tests skip, saying why, where LibTorch has no CUDA or no GPU
// is present; the CPU half of the copier runs everywhere.
#include "benchmarks/support/device_copy.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/train_loop.h"

namespace mlbench::bench {
namespace {

#define SKIP_WITHOUT_GPU()                                                                  \
  do {                                                                                      \
    if (!built_with_cuda()) GTEST_SKIP() << "this LibTorch was built without CUDA";         \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";     \
  } while (0)

TEST(DeviceCopy, OnTheCpuTheHostTensorsComeBackAfterFinish) {
  DeviceCopier copier(torch::kCPU);
  auto host = torch::arange(6, torch::kFloat32);
  auto out = copier.copy({host}, [](std::vector<torch::Tensor>& t) { t[0] = t[0] * 2; });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].device().is_cpu());
  EXPECT_TRUE(torch::equal(out[0], host * 2));
  EXPECT_EQ(copier.in_flight(), 0u);
}

TEST(DeviceCopy, WithoutCudaThereIsNoDeviceTimeline) {
  if (built_with_cuda()) GTEST_SKIP() << "this LibTorch has CUDA: the timeline exists";
  EXPECT_EQ(make_cuda_timeline(), nullptr);
  EXPECT_THROW(DeviceCopier(torch::Device(torch::kCUDA, 0)), std::invalid_argument);
}

// A pinned host tensor whose storage tells when it is let go (as a loader's buffer goes back to its pool).
torch::Tensor watched_pinned(std::int64_t n, std::shared_ptr<std::atomic<bool>> freed) {
  auto owner = std::make_shared<torch::Tensor>(
      torch::arange(n, torch::TensorOptions().dtype(torch::kFloat32)).pin_memory());
  return torch::from_blob(
      owner->data_ptr(), {n},
      [owner, freed](void*) mutable {
        owner.reset();
        *freed = true;
      },
      torch::TensorOptions().dtype(torch::kFloat32));
}

TEST(DeviceCopy, TheHostBufferIsHeldUntilItsCopyHasFinished) {
  SKIP_WITHOUT_GPU();
  const torch::Device gpu(torch::kCUDA, 0);
  DeviceCopier copier(gpu);
  auto freed = std::make_shared<std::atomic<bool>>(false);
  torch::Tensor on_device;
  {
    auto host = watched_pinned(1 << 20, freed);
    EXPECT_TRUE(host.is_pinned());
    on_device = copier.copy({host})[0];
  }
  EXPECT_FALSE(*freed) << "the host buffer was let go while its copy may still read it";
  EXPECT_EQ(copier.in_flight(), 1u);
  torch::cuda::synchronize();
  copier.release_finished();
  EXPECT_EQ(copier.in_flight(), 0u);
  EXPECT_TRUE(*freed);
  EXPECT_TRUE(on_device.device().is_cuda());
  EXPECT_TRUE(torch::equal(on_device.cpu(), torch::arange(1 << 20, torch::kFloat32)));
}

TEST(DeviceCopy, AtMostTwoCopiesStayInFlight) {
  SKIP_WITHOUT_GPU();
  DeviceCopier copier(torch::Device(torch::kCUDA, 0));
  for (int i = 0; i < 5; ++i) copier.copy({torch::ones({1024}).pin_memory()});
  copier.release_finished();
  EXPECT_LE(copier.in_flight(), DeviceCopier::kInFlight);
}

TEST(DeviceCopy, FinishRunsOnTheDeviceBeforeTheComputeStreamReadsTheBatch) {
  SKIP_WITHOUT_GPU();
  DeviceCopier copier(torch::Device(torch::kCUDA, 0));
  auto host = torch::full({4, 3, 8, 8}, 51, torch::kUInt8).pin_memory();
  auto out = copier.copy({host}, [](std::vector<torch::Tensor>& t) { t[0] = t[0].to(torch::kFloat32) / 255.0; });
  EXPECT_TRUE(out[0].is_cuda());
  EXPECT_NEAR(out[0].mean().item<double>(), 0.2, 1e-6);  // read on the compute stream
}

TEST(CudaTimeline, TheDeviceIdlesWhileTheHostWaitsAndComputeIsItsKernels) {
  SKIP_WITHOUT_GPU();
  torch::cuda::synchronize();
  auto timeline = make_cuda_timeline();
  ASSERT_NE(timeline, nullptr);
  auto a = torch::randn({2048, 2048}, torch::Device(torch::kCUDA, 0));
  timeline->begin(core::PhaseKind::kWait);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the device has nothing to do
  timeline->end(core::PhaseKind::kWait);
  timeline->begin(core::PhaseKind::kCompute);
  for (int i = 0; i < 20; ++i) a = torch::mm(a, a).tanh();
  timeline->end(core::PhaseKind::kCompute);
  timeline->end_iteration();
  torch::cuda::synchronize();
  const auto phases = timeline->take();
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_GE(phases[0][0], 0.025);  // wait: at least the host's sleep
  EXPECT_EQ(phases[0][1], 0.0);    // no h2d phase
  EXPECT_GT(phases[0][2], 0.0);
  EXPECT_TRUE(timeline->take().empty());
}

TEST(CudaTimeline, TheTrainLoopReportsTheDevicesPhaseTimes) {
  SKIP_WITHOUT_GPU();
  core::LoopConfig cfg;
  cfg.repeat = 2;
  cfg.number = 3;
  cfg.warmup = 1;
  cfg.sync = [] { torch::cuda::synchronize(); };
  cfg.device_timeline = make_cuda_timeline();
  auto a = torch::randn({1024, 1024}, torch::Device(torch::kCUDA, 0));
  core::LoopResult r;
  core::TrainLoop(cfg).run(
      [&](core::Iteration& it) {
        it.wait([] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
        it.compute([&] { a = torch::mm(a, a).tanh(); });
      },
      r);
  EXPECT_EQ(r.stall_json()["phase_clock"], "device");
  EXPECT_EQ(r.wait.count(), 3u);
  EXPECT_GE(r.wait.min(), 0.004);
  EXPECT_GT(r.compute.min(), 0.0);
}

}  // namespace
}  // namespace mlbench::bench
