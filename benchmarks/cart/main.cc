// cart: REINFORCE (PyTorch's reinforce.py) on the classic CartPole — policy
// Linear(4, 128), dropout 0.6, ReLU, Linear(128, 2), softmax; Adam 1e-2;
// gamma 0.99; standardised returns. CPU only, as in the Mila suite. One
// iteration is one environment step (items = environment steps); the policy
// is updated in the step that ends an episode (failure or 200 steps).
#include <fmt/format.h>
#include <torch/torch.h>

#include <iostream>
#include <optional>

#include "benchmarks/models/seq_models.h"
#include "benchmarks/support/cartpole.h"
#include "benchmarks/support/torch_runtime.h"
#include "source_hash.h"

namespace {

using namespace mlbench;

struct CartOptions {
  double gamma = 0.99, lr = 1e-2;
  int max_steps = 200;
};

void add_flags(core::BenchCli& cli, CartOptions& opt) {
  cli.add_option("--gamma", opt.gamma, "Discount factor")->check(core::number_in(0.0, 1.0));
  cli.add_option("--lr", opt.lr, "Adam learning rate")->check(core::number_above(0));
  cli.add_option("--max-steps", opt.max_steps, "Steps after which an episode ends")
      ->check(core::integer_in(1, 1000000));
}

// After parsing: prints the error and returns 2 for --cuda.
std::optional<int> validate(const core::BenchOptions& o) {
  if (o.cuda.value_or(false)) {
    std::cerr << "cart: error: cart runs on the CPU only (drop --cuda)\n";
    return 2;
  }
  return std::nullopt;
}

bench::CartPoleParams cart_params(int max_steps) {
  bench::CartPoleParams params;
  params.max_steps = max_steps;
  return params;
}

// The environment, the policy and its optimiser, the episode under way and the tallies of the report.
class Reinforce {
 public:
  Reinforce(const CartOptions& opt, std::uint64_t seed) : gamma_(opt.gamma), env_(seed, cart_params(opt.max_steps)) {
    env_.reset();
    optimizer_ = std::make_shared<torch::optim::Adam>(policy_->parameters(), torch::optim::AdamOptions(opt.lr));
  }

  // One environment step; the step that ends an episode updates the policy.
  void step(core::Iteration& it) {
    // The observation is in memory: the "wait" is building the state tensor.
    auto state = it.wait([&] {
      const auto& s = env_.state();
      return torch::tensor({s[0], s[1], s[2], s[3]}, torch::kFloat32).unsqueeze(0);
    });
    std::optional<torch::Tensor> loss = it.compute([&]() -> std::optional<torch::Tensor> {
      auto probs = policy_.ptr()->forward(state);
      auto action = torch::multinomial(probs, 1);
      log_probs_.push_back(torch::log(probs.gather(1, action)).squeeze());
      const auto r = env_.step(static_cast<int>(action.item<std::int64_t>()));
      rewards_.push_back(r.reward);
      if (!r.done) return std::nullopt;
      return end_episode();
    });
    if (loss) it.set_loss(bench::deferred_loss(*loss));
  }

  void finish(nlohmann::json& report) const {
    report["pipeline"] = {{"source", "environment"}, {"environment", "CartPole (C++)"}};
    auto& m = report["metrics"];
    m["parameters"] = bench::parameter_count(*policy_);
    m["episodes"] = episodes_;
    m["mean_episode_length"] = episodes_ > 0 ? reward_sum_ / static_cast<double>(episodes_) : 0.0;
    m["running_reward"] = running_reward_;
  }

 private:
  // End of episode: one REINFORCE update; returns its loss.
  torch::Tensor end_episode() {
    const auto returns = bench::discounted_returns(rewards_, gamma_);
    auto g = torch::tensor(std::vector<float>(returns.begin(), returns.end()));
    auto l = (-torch::stack(log_probs_) * g).sum();
    optimizer_->zero_grad();
    l.backward();
    optimizer_->step();
    const double total = static_cast<double>(rewards_.size());
    running_reward_ = 0.05 * total + 0.95 * running_reward_;
    reward_sum_ += total;
    ++episodes_;
    log_probs_.clear();
    rewards_.clear();
    env_.reset();
    return l;
  }

  double gamma_;
  bench::CartPole env_;
  std::vector<torch::Tensor> log_probs_;
  std::vector<double> rewards_;
  long episodes_ = 0;
  double reward_sum_ = 0;       // over finished episodes
  double running_reward_ = 10;  // reinforce.py's exponential average
  bench::Policy policy_;
  std::shared_ptr<torch::optim::Adam> optimizer_;
};

int run(const core::BenchCli& cli, const CartOptions& opt) {
  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext&) {
    auto agent = std::make_shared<Reinforce>(opt, static_cast<std::uint64_t>(cli.options().seed));
    core::Workload work;
    work.items_per_iteration = 1;
    work.step = [agent](core::Iteration& it) { agent->step(it); };
    work.finish = [agent](nlohmann::json& report) { agent->finish(report); };
    return work;
  });
}

}  // namespace

int main(int argc, char** argv) {
  core::BenchCli cli("cart", "cart: REINFORCE policy gradient on CartPole (CPU only)",
                     {.batch_size = 1, .repeat = 200, .number = 500});
  CartOptions opt;
  add_flags(cli, opt);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (auto rc = validate(cli.options())) return *rc;
  cli.options().cuda = false;  // --no-cuda implied
  return run(cli, opt);
}
