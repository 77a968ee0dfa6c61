// cart: REINFORCE (PyTorch's reinforce.py) on the classic CartPole — policy
// Linear(4, 128), dropout 0.6, ReLU, Linear(128, 2), softmax; Adam 1e-2;
// gamma 0.99; standardised returns. CPU only, as in the Mila suite. One
// iteration is one environment step (items = environment steps); the policy
// is updated in the step that ends an episode (failure or 200 steps).
#include <fmt/format.h>
#include <torch/torch.h>

#include "benchmarks/models/seq_models.h"
#include "benchmarks/support/cartpole.h"
#include "benchmarks/support/torch_runtime.h"
#include "source_hash.h"

int main(int argc, char** argv) {
  using namespace mlbench;
  core::BenchCli cli("cart", "cart: REINFORCE policy gradient on CartPole (CPU only)",
                     {.batch_size = 1, .repeat = 200, .number = 500});
  double gamma = 0.99, lr = 1e-2;
  int max_steps = 200;
  cli.add_option("--gamma", gamma, "Discount factor")->check(core::number_in(0.0, 1.0));
  cli.add_option("--lr", lr, "Adam learning rate")->check(core::number_above(0));
  cli.add_option("--max-steps", max_steps, "Steps after which an episode ends")->check(core::integer_in(1, 1000000));
  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (cli.options().cuda.value_or(false)) {
    std::cerr << "cart: error: cart runs on the CPU only (drop --cuda)\n";
    return 2;
  }
  cli.options().cuda = false;  // --no-cuda implied

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext&) {
    const auto& o = cli.options();
    bench::CartPoleParams params;
    params.max_steps = max_steps;
    struct Episode {
      bench::CartPole env;
      std::vector<torch::Tensor> log_probs;
      std::vector<double> rewards;
      long episodes = 0;
      double reward_sum = 0;   // over finished episodes
      double running_reward = 10;  // reinforce.py's exponential average
    };
    auto ep = std::make_shared<Episode>(Episode{bench::CartPole(static_cast<std::uint64_t>(o.seed), params), {}, {}});
    ep->env.reset();
    bench::Policy policy;
    auto optimizer = std::make_shared<torch::optim::Adam>(policy->parameters(), torch::optim::AdamOptions(lr));
    core::Workload work;
    work.items_per_iteration = 1;
    work.step = [=](core::Iteration& it) mutable {
      // The observation is in memory: the "wait" is building the state tensor.
      auto state = it.wait([&] {
        const auto& s = ep->env.state();
        return torch::tensor({s[0], s[1], s[2], s[3]}, torch::kFloat32).unsqueeze(0);
      });
      std::optional<torch::Tensor> loss = it.compute([&]() -> std::optional<torch::Tensor> {
        auto probs = policy.ptr()->forward(state);
        auto action = torch::multinomial(probs, 1);
        ep->log_probs.push_back(torch::log(probs.gather(1, action)).squeeze());
        const auto r = ep->env.step(static_cast<int>(action.item<std::int64_t>()));
        ep->rewards.push_back(r.reward);
        if (!r.done) return std::nullopt;
        // End of episode: one REINFORCE update.
        const auto returns = bench::discounted_returns(ep->rewards, gamma);
        auto g = torch::tensor(std::vector<float>(returns.begin(), returns.end()));
        auto l = (-torch::stack(ep->log_probs) * g).sum();
        optimizer->zero_grad();
        l.backward();
        optimizer->step();
        const double total = static_cast<double>(ep->rewards.size());
        ep->running_reward = 0.05 * total + 0.95 * ep->running_reward;
        ep->reward_sum += total;
        ++ep->episodes;
        ep->log_probs.clear();
        ep->rewards.clear();
        ep->env.reset();
        return l;
      });
      if (loss) it.set_loss(bench::deferred_loss(*loss));
    };
    work.finish = [=](nlohmann::json& report) {
      report["pipeline"] = {{"source", "environment"}, {"environment", "CartPole (C++)"}};
      auto& m = report["metrics"];
      m["parameters"] = bench::parameter_count(*policy);
      m["episodes"] = ep->episodes;
      m["mean_episode_length"] = ep->episodes > 0 ? ep->reward_sum / static_cast<double>(ep->episodes) : 0.0;
      m["running_reward"] = ep->running_reward;
    };
    return work;
  });
}
