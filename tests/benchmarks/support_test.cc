// benchmarks/support/: CartPole dynamics against hand-computed steps,
// REINFORCE returns, the loss scaling policy, mixed precision (names, the
// --half flag, backward) and the image stream factory with the workload shape
// the image benchmarks share (on a synthetic stream: no dataset, no timing), and
// the stream one batch ahead over a small JPEG folder (the same batches, in order).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "benchmarks/support/cartpole.h"
#include "benchmarks/support/image_stream.h"
#include "benchmarks/support/loss_scaler.h"
#include "benchmarks/support/mixed_precision.h"
#include "pipeline/source.h"
#include "tests/support/jpeg_folder.h"
#include "tests/support/temp_dir.h"

using namespace mlbench::bench;
namespace core = mlbench::core;

// From rest, pushing right: temp = F / (M + m) = 10 / 1.1; theta_acc =
// -temp / (l (4/3 - m / (M + m))) = -14.634146; x_acc = temp - m l theta_acc / (M + m) = 9.756098.
TEST(CartPole, FirstStepFromRestMatchesHandComputation) {
  const auto s = cartpole_dynamics({0, 0, 0, 0}, 1);
  EXPECT_DOUBLE_EQ(s[0], 0.0);
  EXPECT_NEAR(s[1], 0.02 * 9.7560976, 1e-7);
  EXPECT_DOUBLE_EQ(s[2], 0.0);
  EXPECT_NEAR(s[3], 0.02 * -14.6341463, 1e-7);
}

// Euler: positions move with the previous velocities; at theta = 0 the accelerations repeat.
TEST(CartPole, SecondStepUsesPreviousVelocities) {
  const auto s = cartpole_dynamics(cartpole_dynamics({0, 0, 0, 0}, 1), 1);
  EXPECT_NEAR(s[0], 0.02 * 0.19512195, 1e-8);
  EXPECT_NEAR(s[1], 0.39024390, 1e-7);
  EXPECT_NEAR(s[2], 0.02 * -0.29268293, 1e-8);
  EXPECT_NEAR(s[3], -0.58536585, 1e-7);
}

// Pole leaning 0.1 rad, pushing left: sin = 0.0998334, cos = 0.9950042, temp = -9.0909091,
// theta_acc = (9.8 sin - cos temp) / (0.5 (4/3 - 0.1 cos^2 / 1.1)) = 16.124167,
// x_acc = temp - 0.05 theta_acc cos / 1.1 = -9.8201789.
TEST(CartPole, LeaningPolePushedLeft) {
  const auto s = cartpole_dynamics({0.5, 0.0, 0.1, 0.0}, 0);
  EXPECT_DOUBLE_EQ(s[0], 0.5);
  EXPECT_NEAR(s[1], 0.02 * -9.8201789, 1e-6);
  EXPECT_DOUBLE_EQ(s[2], 0.1);
  EXPECT_NEAR(s[3], 0.02 * 16.124167, 1e-6);
}

TEST(CartPole, FailsPastTwelveDegreesAndAtStepCap) {
  CartPole env(1);
  env.reset_to({0, 0, 0.2094, 0.5});  // just under 12 degrees, falling further
  auto r = env.step(1);
  EXPECT_TRUE(r.done);
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.reward, 1.0);
  env.reset_to({2.39, 1.0, 0, 0});
  EXPECT_TRUE(env.step(1).failed);  // cart leaves +-2.4

  CartPoleParams p;
  p.max_steps = 3;
  CartPole capped(1, p);
  capped.reset_to({0, 0, 0, 0});
  int action = 0;
  EXPECT_FALSE(capped.step(action ^= 1).done);
  EXPECT_FALSE(capped.step(action ^= 1).done);
  auto last = capped.step(action ^= 1);
  EXPECT_TRUE(last.done);
  EXPECT_FALSE(last.failed);
}

TEST(CartPole, ResetIsSeededAndSmall) {
  CartPole a(7), b(7), c(8);
  const auto sa = a.reset();
  const auto sb = b.reset();
  const auto sc = c.reset();
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
  for (double v : sa) EXPECT_LE(std::abs(v), 0.05);
  EXPECT_THROW(cartpole_dynamics({0, 0, 0, 0}, 2), std::invalid_argument);
}

TEST(Reinforce, DiscountedReturns) {
  const auto raw = discounted_returns({1, 1, 1}, 0.5, false);
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_DOUBLE_EQ(raw[2], 1.0);
  EXPECT_DOUBLE_EQ(raw[1], 1.5);
  EXPECT_DOUBLE_EQ(raw[0], 1.75);
  // Standardised with the sample sd: mean 1.41667, sd 0.381881.
  const auto z = discounted_returns({1, 1, 1}, 0.5, true);
  EXPECT_NEAR(z[0], (1.75 - 1.4166667) / 0.3818813, 1e-6);
  EXPECT_NEAR(z[2], (1.0 - 1.4166667) / 0.3818813, 1e-6);
}

TEST(LossScaler, BacksOffOnOverflowAndGrowsAfterInterval) {
  LossScaler s(1024.0, 3);
  EXPECT_FALSE(s.update(true));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_TRUE(s.update(false));
  EXPECT_DOUBLE_EQ(s.scale(), 1024.0);
}

TEST(MixedPrecision, OneVocabularyOfPrecisionNames) {
  EXPECT_STREQ(precision_name(false, false), "fp32");
  EXPECT_STREQ(precision_name(false, true), "fp32");
  EXPECT_STREQ(precision_name(true, true), "fp16-autocast");
  EXPECT_STREQ(precision_name(true, false), "bf16-autocast");
}

namespace {

// One backward of sum(3 w) through `mp` (the step must not be skipped and the
// gradient must come back unscaled); returns the metrics `mp` reports.
nlohmann::json step_and_report(MixedPrecision& mp) {
  auto w = torch::ones({2}, torch::requires_grad());
  EXPECT_TRUE(mp.backward((w * 3).sum(), {w}));
  EXPECT_TRUE(torch::allclose(w.grad(), torch::full({2}, 3.0)));
  nlohmann::json m;
  mp.report(m);
  return m;
}

}  // namespace

// A parameter whose gradient is `g`.
torch::Tensor with_grad(const torch::Tensor& g) {
  auto p = torch::zeros_like(g).requires_grad_(true);
  p.mutable_grad() = g.clone();
  return p;
}

TEST(MixedPrecision, UnscaleDividesEveryGradientAndFindsNoOverflowInFiniteOnes) {
  std::vector<torch::Tensor> params{with_grad(torch::tensor({2.0f, -4.0f})), with_grad(torch::full({3}, 3e38f)),
                                    torch::zeros({2}).requires_grad_(true)};  // no gradient: skipped
  EXPECT_FALSE(unscale_gradients_and_check(params, 2.0));
  EXPECT_TRUE(torch::equal(params[0].grad(), torch::tensor({1.0f, -2.0f})));
  EXPECT_FLOAT_EQ(params[1].grad()[0].item<float>(), 1.5e38f);  // large but finite: no overflow
  EXPECT_FALSE(params[2].grad().defined());
}

TEST(MixedPrecision, UnscaleFindsAnInfOrANanInAnyGradient) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<torch::Tensor> with_inf{with_grad(torch::ones({4})), with_grad(torch::tensor({1.0f, -inf}))};
  EXPECT_TRUE(unscale_gradients_and_check(with_inf, 1024.0));
  std::vector<torch::Tensor> with_nan{with_grad(torch::tensor({std::nanf("")})), with_grad(torch::ones({2}))};
  EXPECT_TRUE(unscale_gradients_and_check(with_nan, 1.0));
  std::vector<torch::Tensor> none{torch::zeros({2}).requires_grad_(true)};
  EXPECT_FALSE(unscale_gradients_and_check(none, 1.0));
}

TEST(MixedPrecision, Fp32StepsAndReportsNoScaling) {
  MixedPrecision mp(false, torch::kCPU);
  const auto m = step_and_report(mp);
  EXPECT_EQ(m["precision"], "fp32");
  EXPECT_FALSE(m.contains("loss_scale"));
  EXPECT_FALSE(m.contains("cpu_native_bf16"));
}

TEST(MixedPrecision, CpuIsBf16AutocastWithoutScaling) {
  MixedPrecision mp(true, torch::kCPU);
  {
    auto scope = mp.autocast();
    auto a = torch::ones({4, 4});
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(torch::mm(torch::ones({4, 4}), torch::ones({4, 4})).scalar_type(), torch::kFloat32);
  const auto m = step_and_report(mp);
  EXPECT_EQ(m["precision"], "bf16-autocast");
  EXPECT_TRUE(m.contains("cpu_native_bf16"));
  EXPECT_FALSE(m.contains("loss_scale"));
}

TEST(MixedPrecision, HalfFlagOnlyOnTheFp32Variant) {
  bool mixed = false;
  core::BenchCli fp32("prog", "test", {});
  add_precision_flag(fp32, {"prog", false, ""}, mixed);
  const char* with_half[] = {"prog", "--half"};
  ASSERT_FALSE(fp32.parse(2, with_half, {}).has_value());
  EXPECT_TRUE(mixed);

  bool always = false;
  core::BenchCli fp16("prog_fp16", "test", {});
  add_precision_flag(fp16, {"prog_fp16", true, ""}, always);
  EXPECT_TRUE(always);
  const char* plain[] = {"prog_fp16"};
  ASSERT_FALSE(fp16.parse(1, plain, {}).has_value());
  EXPECT_TRUE(always);
}

namespace {

// Shared flags of a --synthetic run with batch size `n`.
core::BenchOptions synthetic_options(int n) {
  core::BenchOptions o;
  o.synthetic = true;
  o.batch_size = n;
  return o;
}

}  // namespace

TEST(ImageStream, SyntheticStreamFeedsTheStepAndReportsItsSource) {
  const auto o = synthetic_options(3);
  mlbench::pipeline::PipelineOptions p;
  int made = 0;
  auto stream = vision::make_image_stream(o, p, torch::kCPU,
                                          {.dataset = "none",
                                           .synthetic =
                                               [&] {
                                                 ++made;
                                                 return vision::synthetic_batch(3, 8, 10, torch::kCPU);
                                               },
                                           .open = [](const std::string&) -> vision::PipelineSource {
                                             throw std::logic_error("--synthetic opens no dataset");
                                           }});
  EXPECT_EQ(made, 1);
  ASSERT_TRUE(stream->synthetic());
  int steps = 0;
  auto work = vision::image_workload(
      o, p, stream,
      [&](const vision::DeviceBatch& b) {
        ++steps;
        EXPECT_EQ(b.images.sizes(), (std::vector<std::int64_t>{3, 3, 8, 8}));
        EXPECT_EQ(b.labels.size(0), 3);
        return b.images.mean();
      },
      [](nlohmann::json& m) { m["parameters"] = 42; });
  EXPECT_DOUBLE_EQ(work.items_per_iteration, 3.0);
  core::Iteration it;
  work.step(it);
  work.step(it);
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(made, 1);  // made once, reused every iteration
  nlohmann::json report;
  work.finish(report);
  EXPECT_EQ(report["pipeline"], (nlohmann::json{{"source", "synthetic"}}));
  EXPECT_EQ(report["metrics"]["parameters"], 42);
}

TEST(ImageStream, FetchOnlySkipsTheModelStep) {
  const auto o = synthetic_options(2);
  mlbench::pipeline::PipelineOptions p;
  p.fetch_only = true;
  auto stream = vision::make_image_stream(o, p, torch::kCPU, {.dataset = "none", .synthetic = [] {
                                                                return vision::uniform_images(2, 8, -1, 1, torch::kCPU);
                                                              }});
  int steps = 0;
  auto work = vision::image_workload(o, p, stream,
                                     [&](const vision::DeviceBatch& b) {
                                       ++steps;
                                       return b.images.mean();
                                     },
                                     {});
  core::Iteration it;
  work.step(it);
  EXPECT_EQ(steps, 0);
  nlohmann::json report;
  work.finish(report);
  EXPECT_EQ(report["pipeline"]["source"], "synthetic");
}

namespace {

// The labels of every batch an ImageStream over a 3-class folder of 4 images each hands out,
// batch size 2, one epoch (6 batches), shuffled; `ahead`: one batch staged ahead.
std::vector<std::vector<std::int64_t>> labels_of_an_epoch(const std::filesystem::path& root, bool ahead, int extra_calls) {
  mlbench::pipeline::LoaderConfig c;
  c.batch_size = 2;
  c.workers = 2;
  c.seed = 7;
  c.max_epochs = 1;
  c.transform.image_size = 16;
  auto source = std::make_shared<mlbench::pipeline::ImageFolderReader>(root);
  vision::ImageStream stream(source, c, torch::kCPU, {}, ahead);
  std::vector<std::vector<std::int64_t>> out;
  core::Iteration it;
  for (int i = 0; i < 6; ++i) {
    auto b = stream.next(it);
    EXPECT_EQ(b.images.sizes(), (std::vector<std::int64_t>{2, 3, 16, 16}));
    out.emplace_back(b.labels.data_ptr<std::int64_t>(), b.labels.data_ptr<std::int64_t>() + 2);
  }
  for (int i = 0; i < extra_calls; ++i) EXPECT_THROW(stream.next(it), std::runtime_error);
  nlohmann::json report;
  stream.finish(report);
  return out;
}

}  // namespace

TEST(ImageStream, OneBatchAheadHandsOutTheSameBatchesInTheSameOrder) {
  const mlbench::testing_support::TempDir tmp("image_stream_ahead");
  const auto root = mlbench::testing_support::make_jpeg_folder(tmp.path(), 3, 4);
  const auto plain = labels_of_an_epoch(root, false, 1);
  const auto ahead = labels_of_an_epoch(root, true, 1);  // the last batch is handed out although
                                                         // the pipeline ended when it was staged
  EXPECT_EQ(plain, ahead);
  std::vector<int> per_class(3);
  for (const auto& b : plain) {
    for (auto l : b) ++per_class.at(static_cast<std::size_t>(l));
  }
  EXPECT_EQ(per_class, (std::vector<int>{4, 4, 4}));  // one epoch, every image once
}

TEST(ImageStream, UniformImagesLieInTheirRange) {
  const auto b = vision::uniform_images(4, 8, -1, 1, torch::kCPU);
  EXPECT_EQ(b.images.sizes(), (std::vector<std::int64_t>{4, 3, 8, 8}));
  EXPECT_GE(b.images.min().item<float>(), -1.0f);
  EXPECT_LT(b.images.max().item<float>(), 1.0f);
  EXPECT_FALSE(b.labels.defined());
}
