// benchmarks/support/device_copy: the side-stream copies and the CUDA event
// timeline. The GPU tests skip, saying why, where LibTorch has no CUDA or no GPU
// is present; the CPU half of the copier runs everywhere.
#include "benchmarks/support/device_copy.h"

#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "benchmarks/support/mixed_precision.h"
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

TEST(DeviceCopy, OneCopyIsStagedAndTakenInOrder) {
  DeviceCopier copier(torch::kCPU);
  EXPECT_FALSE(copier.staged());
  EXPECT_THROW(copier.take(), std::logic_error);
  int finished = 0;
  copier.stage({torch::full({2}, 1.0)}, [&](std::vector<torch::Tensor>& t) {
    ++finished;
    t[0] = t[0] + 1;
  });
  EXPECT_EQ(finished, 1);  // `finish` runs when the copy is issued, not when it is taken
  EXPECT_TRUE(copier.staged());
  EXPECT_THROW(copier.stage({torch::zeros({2})}), std::logic_error);
  auto out = copier.take();
  EXPECT_FALSE(copier.staged());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(torch::equal(out[0], torch::full({2}, 2.0)));
  EXPECT_THROW(copier.take(), std::logic_error);
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

TEST(DeviceCopy, AStagedCopyHoldsItsBufferUntilTakenAndFinished) {
  SKIP_WITHOUT_GPU();
  const torch::Device gpu(torch::kCUDA, 0);
  auto freed = std::make_shared<std::atomic<bool>>(false);
  {
    DeviceCopier copier(gpu);
    copier.stage({watched_pinned(1 << 20, freed)});
    torch::cuda::synchronize();
    copier.release_finished();
    EXPECT_FALSE(*freed) << "a staged copy's buffer was let go before take()";
    EXPECT_EQ(copier.in_flight(), 0u);  // staged, not yet handed out
    auto on_device = copier.take()[0];
    EXPECT_EQ(copier.in_flight(), 1u);
    EXPECT_TRUE(torch::equal(on_device.cpu(), torch::arange(1 << 20, torch::kFloat32)));
    copier.stage({watched_pinned(16, std::make_shared<std::atomic<bool>>(false))});
  }  // destroyed with a copy staged: waits for it, nothing leaks or crashes
  EXPECT_TRUE(*freed);
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
  EXPECT_EQ(r.phases().phase_clock, "device");
  EXPECT_EQ(r.wait.count(), 3u);
  EXPECT_GE(r.wait.min(), 0.004);
  EXPECT_GT(r.compute.min(), 0.0);
}

// The fused unscale-and-check of the GPU path gives what the CPU path gives.
TEST(GpuLossScaling, FusedUnscaleMatchesTheCpuPathAndFindsAnInf) {
  SKIP_WITHOUT_GPU();
  auto make = [](const torch::Device& d, bool with_inf) {
    std::vector<torch::Tensor> params;
    for (int i = 0; i < 3; ++i) {
      auto p = torch::ones({4 + i}, torch::TensorOptions().device(d).requires_grad(true));
      auto g = torch::arange(4 + i, torch::kFloat32).to(d) * 8.0;
      if (with_inf && i == 2) g[1] = std::numeric_limits<float>::infinity();
      p.mutable_grad() = g;
      params.push_back(p);
    }
    return params;
  };
  const torch::Device gpu(torch::kCUDA, 0);
  auto on_gpu = make(gpu, false), on_cpu = make(torch::kCPU, false);
  EXPECT_FALSE(unscale_gradients_and_check(on_gpu, 8.0));
  EXPECT_FALSE(unscale_gradients_and_check(on_cpu, 8.0));
  for (std::size_t i = 0; i < on_gpu.size(); ++i) {
    EXPECT_TRUE(torch::allclose(on_gpu[i].grad().cpu(), on_cpu[i].grad())) << i;
    EXPECT_TRUE(torch::allclose(on_cpu[i].grad(), torch::arange(4 + static_cast<int>(i), torch::kFloat32))) << i;
  }
  EXPECT_TRUE(unscale_gradients_and_check(make(gpu, true), 8.0));
}

}  // namespace
}  // namespace mlbench::bench
