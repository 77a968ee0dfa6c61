// benchmarks/scaling/reducer: two ranks in threads over ProcessGroupGloo (loopback, an in-memory
// store), each on its own data. The gradients the reducer leaves must be the average of the ranks'
// own gradients (as one process computes them), iteration after iteration, with unused parameters
// zero, and the .grad of every parameter a view of its bucket.
#include <gtest/gtest.h>

#include <thread>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include "reducer.h"

namespace {

using mlbench::scaling::BucketReducer;

struct Net : torch::nn::Module {
  Net() {
    a = register_module("a", torch::nn::Linear(6, 5));
    b = register_module("b", torch::nn::Linear(5, 4));
    unused = register_module("unused", torch::nn::Linear(2, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return b(torch::relu(a(x))); }
  torch::nn::Linear a{nullptr}, b{nullptr}, unused{nullptr};
};

std::shared_ptr<Net> make_net() {
  torch::manual_seed(7);  // the same weights on every rank and in the reference
  return std::make_shared<Net>();
}

// Rank r's batch at iteration i.
std::pair<torch::Tensor, torch::Tensor> batch(int r, int i) {
  torch::manual_seed(100 + 10 * i + r);
  return {torch::randn({3 + r, 6}), torch::randint(0, 4, {3 + r})};
}

// Each parameter's gradient averaged over the ranks' batches, as one process computes it.
std::vector<torch::Tensor> reference_grads(int world, int i) {
  auto net = make_net();
  std::vector<torch::Tensor> sum;
  for (int r = 0; r < world; ++r) {
    net->zero_grad();
    auto [x, y] = batch(r, i);
    torch::cross_entropy_loss(net->forward(x), y).backward();
    auto ps = net->parameters();
    for (std::size_t k = 0; k < ps.size(); ++k) {
      torch::Tensor g = ps[k].grad().defined() ? ps[k].grad().clone() : torch::zeros_like(ps[k]);
      if (sum.size() <= k) sum.push_back(g);
      else sum[k] += g;
    }
  }
  for (auto& g : sum) g /= world;
  return sum;
}

TEST(ScalingReducer, GradientsAreTheRanksAverageEveryIterationWithUnusedParametersZero) {
  constexpr int world = 2, iterations = 3;
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::vector<std::vector<torch::Tensor>>> got(world);  // [rank][iteration][param]
  std::vector<std::string> errors(world);
  std::vector<std::size_t> buckets(world);
  std::vector<bool> views(world, true);
  // Nets and batches made here: the seed is global, the threads would race on it.
  std::vector<std::shared_ptr<Net>> nets;
  std::vector<std::vector<std::pair<torch::Tensor, torch::Tensor>>> batches(world);
  for (int r = 0; r < world; ++r) {
    nets.push_back(make_net());
    for (int i = 0; i < iterations; ++i) batches[r].push_back(batch(r, i));
  }
  auto run = [&](int r) {
    try {
      auto opts = c10d::ProcessGroupGloo::Options::create();
      opts->timeout = std::chrono::milliseconds(60000);
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, r, world, opts);
      auto net = nets[r];
      auto params = net->parameters();
      // Buckets of 16 bytes or more: five, so that some launch during backward and the unused
      // parameters' never fills.
      BucketReducer reducer(pg, params, 16);
      buckets[r] = reducer.buckets();
      for (int i = 0; i < iterations; ++i) {
        auto [x, y] = batches[r][i];
        auto loss = torch::cross_entropy_loss(net->forward(x), y);
        if (i == 1) net->zero_grad();  // whatever zero_grad does to .grad, prepare() re-points it
        reducer.prepare();
        (loss * reducer.loss_scale()).backward();
        reducer.finish();
        std::vector<torch::Tensor> gs;
        for (auto& p : params) gs.push_back(p.grad().clone());
        got[r].push_back(std::move(gs));
        // Not stepping: the weights stay those of the reference.
      }
      // The grads are the buckets: zeroing through prepare() zeroes them.
      reducer.prepare();
      for (auto& p : params) views[r] = views[r] && p.grad().defined() && p.grad().abs().sum().item<double>() == 0;
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  };
  std::thread t0(run, 0), t1(run, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  EXPECT_EQ(buckets[0], 5u);
  for (int i = 0; i < iterations; ++i) {
    const auto want = reference_grads(world, i);
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(got[r][i].size(), want.size());
      for (std::size_t k = 0; k < want.size(); ++k) {
        EXPECT_TRUE(torch::allclose(got[r][i][k], want[k], 1e-5, 1e-6))
            << "rank " << r << " iteration " << i << " parameter " << k << ": got " << got[r][i][k] << " want "
            << want[k];
      }
    }
  }
  EXPECT_TRUE(views[0]);
  EXPECT_TRUE(views[1]);
}

}  // namespace

namespace {

// DDP's buckets: the first (the last layers', ready first) smaller, so that its allreduce starts early.
TEST(ScalingReducer, TheFirstBucketClosesAtItsOwnSize) {
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::HashStore>(), 0, 1, opts);
  // In reverse: unused (24 bytes), then b and a (236 bytes). A net each: a reducer hooks its parameters.
  auto one = make_net(), two = make_net();
  EXPECT_EQ(BucketReducer(pg, one->parameters(), 1000).buckets(), 1u);
  EXPECT_EQ(BucketReducer(pg, two->parameters(), 1000, 16).buckets(), 2u);
}

}  // namespace
