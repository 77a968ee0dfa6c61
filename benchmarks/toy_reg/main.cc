// toy_reg: fit a random degree-4 polynomial with Linear(4, 1), as the Mila
// suite's regression/polynome. The template every benchmark follows: flags,
// set-up returning a step, phases timed by the shared loop, report by core.
#include <torch/torch.h>

#include "benchmarks/support/torch_runtime.h"
#include "source_hash.h"

namespace {

// [x, x^2, ..., x^degree] as columns.
torch::Tensor make_features(const torch::Tensor& x, int degree) {
  auto col = x.unsqueeze(1);
  std::vector<torch::Tensor> powers;
  for (int i = 1; i <= degree; ++i) powers.push_back(col.pow(i));
  return torch::cat(powers, 1);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mlbench;
  core::BenchCli cli("toy_reg", "toy_reg: fit a random polynomial with one linear layer",
                     {.batch_size = 256, .repeat = 20, .number = 100});
  int degree = 4;
  double lr = 0.1;
  cli.add_option("--degree", degree, "Degree of the target polynomial")->check(core::integer_at_least(1));
  cli.add_option("--lr", lr, "SGD learning rate")->check(core::number_above(0));
  if (auto rc = cli.parse(argc, argv)) return *rc;

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    const int bs = cli.options().batch_size;
    const bool synthetic = cli.options().synthetic;
    auto w_target = torch::randn({degree, 1}) * 5;
    auto b_target = torch::randn({1}) * 5;
    auto get_batch = [=] {
      auto x = make_features(torch::randn({bs}), degree);
      auto y = x.mm(w_target) + b_target;
      return std::make_pair(x, y);
    };
    auto model = std::make_shared<torch::nn::Linear>(degree, 1);
    (*model)->to(ctx.device);
    auto optimizer = std::make_shared<torch::optim::SGD>((*model)->parameters(), torch::optim::SGDOptions(lr));
    std::optional<std::pair<torch::Tensor, torch::Tensor>> fixed;
    if (synthetic) {
      auto b = get_batch();
      fixed = std::make_pair(b.first.to(ctx.device), b.second.to(ctx.device));
    }
    core::Workload work;
    work.items_per_iteration = bs;
    work.step = [=, device = ctx.device](core::Iteration& it) {
      auto batch = fixed ? *fixed : it.wait(get_batch);
      if (!fixed) {
        batch = it.h2d([&] {
          return std::make_pair(batch.first.to(device, /*non_blocking=*/true), batch.second.to(device, true));
        });
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
  });
}
