// toy_reg: fit a random degree-4 polynomial with Linear(4, 1), as the Mila
// suite's regression/polynome. The template every benchmark follows: an
// options struct and its flags, run() with the set-up returning a step, phases
// timed by the shared loop, report by core.
#include <torch/torch.h>

#include "benchmarks/support/torch_runtime.h"
#include "source_hash.h"

namespace {

using namespace mlbench;

// [x, x^2, ..., x^degree] as columns.
torch::Tensor make_features(const torch::Tensor& x, int degree) {
  auto col = x.unsqueeze(1);
  std::vector<torch::Tensor> powers;
  for (int i = 1; i <= degree; ++i) powers.push_back(col.pow(i));
  return torch::cat(powers, 1);
}

struct ToyRegOptions {
  int degree = 4;
  double lr = 0.1;
};

void add_flags(core::BenchCli& cli, ToyRegOptions& opt) {
  cli.add_option("--degree", opt.degree, "Degree of the target polynomial")->check(core::integer_at_least(1));
  cli.add_option("--lr", opt.lr, "SGD learning rate")->check(core::number_above(0));
}

core::Workload make_workload(const core::BenchOptions& o, const ToyRegOptions& opt, const torch::Device& device) {
  const int bs = o.batch_size;
  const bool synthetic = o.synthetic;
  const int degree = opt.degree;
  auto w_target = torch::randn({degree, 1}) * 5;
  auto b_target = torch::randn({1}) * 5;
  auto get_batch = [=] {
    auto x = make_features(torch::randn({bs}), degree);
    auto y = x.mm(w_target) + b_target;
    return std::make_pair(x, y);
  };
  auto model = std::make_shared<torch::nn::Linear>(degree, 1);
  (*model)->to(device);
  auto optimizer = std::make_shared<torch::optim::SGD>((*model)->parameters(), torch::optim::SGDOptions(opt.lr));
  std::optional<std::pair<torch::Tensor, torch::Tensor>> fixed;
  if (synthetic) {
    auto b = get_batch();
    fixed = std::make_pair(b.first.to(device), b.second.to(device));
  }
  core::Workload work;
  work.items_per_iteration = bs;
  work.step = [=](core::Iteration& it) {
    auto batch = fixed ? *fixed : it.wait(get_batch);
    if (!fixed) {
      batch = it.h2d(
          [&] { return std::make_pair(batch.first.to(device, /*non_blocking=*/true), batch.second.to(device, true)); });
    }
    auto loss = it.compute([&] {
      optimizer->zero_grad();
      auto l = torch::smooth_l1_loss((*model)->forward(batch.first), batch.second);
      l.backward();
      optimizer->step();
      return l;
    });
    it.set_loss(bench::deferred_loss(loss));
  };
  work.finish = [synthetic](nlohmann::json& report) {
    report["pipeline"] = {{"source", synthetic ? "synthetic" : "generated-in-loop"}};
  };
  return work;
}

int run(const core::BenchCli& cli, const ToyRegOptions& opt) {
  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    return make_workload(cli.options(), opt, ctx.device);
  });
}

}  // namespace

int main(int argc, char** argv) {
  core::BenchCli cli("toy_reg", "toy_reg: fit a random polynomial with one linear layer",
                     {.batch_size = 256, .repeat = 20, .number = 100});
  ToyRegOptions opt;
  add_flags(cli, opt);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return run(cli, opt);
}
