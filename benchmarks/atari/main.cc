// atari: PPO (Schulman et al. 2017) from pixels on mlbench-pong, the Mila
// suite's Atari benchmark with mlbench's own game (ALE and the Atari ROMs are
// not packaged for Debian). The usual Atari recipe (OpenAI baselines' ppo2):
// the Nature-DQN network with a policy and a value head, --envs environments
// (16) each in a worker process with shared-memory observations, rollouts of
// 128 steps, GAE (gamma 0.99, lambda 0.95), 4 epochs of 4 minibatches, clipped
// objective (0.1), value loss 0.5, entropy 0.01, Adam 2.5e-4 (eps 1e-5),
// gradients clipped to norm 0.5. One iteration is one rollout and its update;
// items are agent steps (envs x rollout). The iteration's wait (the stall) is
// the time the learner waits on the environments' steps; inference during the
// rollout and the update are its compute, also reported apart in `metrics`.
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <iostream>
#include <random>

#include "core/statistics.h"
#include "core/stop_signals.h"

#include "benchmarks/atari/env_workers.h"
#include "benchmarks/atari/gae.h"
#include "benchmarks/models/parameter_count.h"
#include "benchmarks/support/torch_runtime.h"
#include "source_hash.h"

namespace {

using namespace mlbench;

// The Nature-DQN torso (Mnih et al. 2015) with PPO's policy and value heads;
// orthogonal initialisation as baselines (gain sqrt 2; 0.01 policy, 1 value).
struct NatureCnnImpl : torch::nn::Module {
  NatureCnnImpl(int stack, int actions)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(stack, 32, 8).stride(4)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 4).stride(2)))),
        conv3(register_module("conv3", torch::nn::Conv2d(torch::nn::Conv2dOptions(64, 64, 3).stride(1)))),
        fc(register_module("fc", torch::nn::Linear(64 * 7 * 7, 512))),
        policy(register_module("policy", torch::nn::Linear(512, actions))),
        value(register_module("value", torch::nn::Linear(512, 1))) {
    torch::NoGradGuard no_grad;
    const double relu_gain = std::sqrt(2.0);
    for (auto* w : {&conv1->weight, &conv2->weight, &conv3->weight, &fc->weight})
      torch::nn::init::orthogonal_(*w, relu_gain);
    torch::nn::init::orthogonal_(policy->weight, 0.01);
    torch::nn::init::orthogonal_(value->weight, 1.0);
    for (auto* b : {&conv1->bias, &conv2->bias, &conv3->bias, &fc->bias, &policy->bias, &value->bias}) b->zero_();
  }
  // obs: uint8 N x stack x 84 x 84 -> (logits N x actions, value N)
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& obs) {
    auto x = obs.to(torch::kFloat32).div(255.0);
    x = torch::relu(conv1(x));
    x = torch::relu(conv2(x));
    x = torch::relu(conv3(x));
    x = torch::relu(fc(x.flatten(1)));
    return {policy(x), value(x).squeeze(-1)};
  }
  torch::nn::Conv2d conv1, conv2, conv3;
  torch::nn::Linear fc, policy, value;
};
TORCH_MODULE(NatureCnn);

struct PpoParams {
  int envs = 16;
  int rollout = 128;
  int epochs = 4;
  int minibatches = 4;
  double lr = 2.5e-4;
  double clip = 0.1;
  double gamma = 0.99;
  double gae_lambda = 0.95;
  double entropy_coef = 0.01;
  double value_coef = 0.5;
  double max_grad_norm = 0.5;
};

// Mean, sample sd, min and max of episode returns.
nlohmann::json return_summary(const std::vector<int>& scores) {
  const std::vector<double> xs(scores.begin(), scores.end());
  return {{"mean", core::mean(xs)},
          {"sd", xs.size() > 1 ? core::sd_sample(xs) : 0.0},
          {"min", *std::min_element(scores.begin(), scores.end())},
          {"max", *std::max_element(scores.begin(), scores.end())},
          {"scores", scores}};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  core::BenchCli cli("atari", "atari: PPO from pixels on mlbench-pong, environments in worker processes",
                     {.batch_size = 1, .repeat = 15, .number = 2});
  PpoParams ppo;
  atari::EnvConfig env;
  cli.add_option("--envs", ppo.envs, "Environments, each in its own worker process")->check(core::integer_in(1, 256));
  cli.add_option("--rollout", ppo.rollout, "Steps per environment in one rollout")->check(core::integer_in(1, 100000));
  cli.add_option("--epochs", ppo.epochs, "Passes over a rollout per update")->check(core::integer_in(1, 1000));
  cli.add_option("--minibatches", ppo.minibatches, "Minibatches per epoch")->check(core::integer_in(1, 1000000));
  cli.add_option("--lr", ppo.lr, "Adam learning rate")->check(core::number_above(0));
  cli.add_option("--clip", ppo.clip, "PPO's clip range")->check(core::number_above(0));
  cli.add_option("--gamma", ppo.gamma, "Discount factor")->check(core::number_in(0.0, 1.0));
  cli.add_option("--gae-lambda", ppo.gae_lambda, "GAE's lambda")->check(core::number_in(0.0, 1.0));
  cli.add_option("--entropy-coef", ppo.entropy_coef, "Weight of the entropy bonus")->check(core::number_in(0.0));
  cli.add_option("--value-coef", ppo.value_coef, "Weight of the value loss")->check(core::number_in(0.0));
  cli.add_option("--max-grad-norm", ppo.max_grad_norm, "Gradient norm clip")->check(core::number_above(0));
  cli.add_option("--ball-speed", env.game.ball_vx, "mlbench-pong: the ball's columns per frame")
      ->check(core::integer_in(1, 16));
  cli.add_option("--opponent-speed", env.game.opponent_speed, "mlbench-pong: the opponent's rows per frame (0: idle)")
      ->check(core::integer_in(0, 64));
  cli.add_option("--ball-vy-max", env.game.ball_vy_max, "mlbench-pong: the ball's rows per frame at most")
      ->check(core::integer_in(0, 16));
  cli.add_option("--paddle-height", env.game.paddle_height, "mlbench-pong: both paddles' rows")
      ->check(core::integer_in(1, atari::kFieldBottom - atari::kFieldTop));
  cli.add_option("--agent-paddle-height", env.game.agent_paddle_height,
                 "mlbench-pong: the agent's paddle alone (0: --paddle-height); taller is an easier game")
      ->check(core::integer_in(0, atari::kFieldBottom - atari::kFieldTop));
  cli.add_option("--max-frames", env.game.max_frames,
                 "mlbench-pong: frames after which a game ends whatever the score (ALE v4's 108,000)")
      ->check(core::integer_in(1, 100000000));
  cli.add_flag("--serve-to-agent", env.game.serve_to_agent,
               "mlbench-pong: every serve towards the agent (each point asks for a catch)");
  cli.add_option("--serve-row", env.game.serve_row,
                 "mlbench-pong: every serve from this row of the field (0: the top row; -1: a random row)")
      ->check(core::integer_in(-1, atari::kFieldBottom - atari::kFieldTop - 1));
  cli.add_option("--points", env.game.points_to_win, "mlbench-pong: points that end a game")
      ->check(core::integer_in(1, 1000));
  cli.add_option("--reply-timeout", env.reply_timeout_s, "Seconds a silent environment worker may take",
                 core::ArgKind::Runtime)
      ->check(core::number_above(0));
  int eval_episodes = 0;
  cli.add_option("--eval-episodes", eval_episodes,
                 "After the timed run, untimed: play N whole episodes with the trained policy (actions sampled "
                 "from it), N with its most likely actions and N with a uniformly random policy, on fresh "
                 "environments; metrics.eval")
      ->check(core::integer_in(0, 100000));
  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (cli.options().batch_size != 1) {
    std::cerr << "atari: error: --batch-size does not apply: a rollout is --envs x --rollout steps, split into "
                 "--minibatches\n";
    return 2;
  }
  if (ppo.minibatches > ppo.envs * ppo.rollout) {
    std::cerr << fmt::format("atari: error: --minibatches {} exceeds the {} steps of a rollout (--envs x --rollout)\n",
                             ppo.minibatches, ppo.envs * ppo.rollout);
    return 2;
  }

  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    const auto& o = cli.options();
    env.seed = static_cast<std::uint64_t>(o.seed) * 1000;
    const int n = ppo.envs, steps = ppo.rollout, depth = env.wrap.stack;
    struct State {
      std::unique_ptr<atari::EnvWorkers> envs;
      NatureCnn net{nullptr};
      std::unique_ptr<torch::optim::Adam> optimizer;
      torch::Tensor obs, actions, log_probs, values;  // rollout storage: steps x envs (x obs)
      std::vector<float> rewards;
      std::vector<unsigned char> dones;
      double inference_s = 0, update_s = 0, env_wait_s = 0;
      long updates = 0, agent_steps = 0, episodes = 0;
      double score_sum = 0, episode_steps_sum = 0;
      std::deque<int> recent_scores;  // the last 100 episodes' scores
      nlohmann::json eval;            // --eval-episodes' result (null without)
    };
    auto st = std::make_shared<State>();
    // The workers fork before the model exists: a child copies as little as possible.
    st->envs = std::make_unique<atari::EnvWorkers>(n, env);
    st->net = NatureCnn(depth, atari::kActionCount);
    st->net->to(ctx.device);
    st->optimizer =
        std::make_unique<torch::optim::Adam>(st->net->parameters(), torch::optim::AdamOptions(ppo.lr).eps(1e-5));
    const auto u8 = torch::TensorOptions().dtype(torch::kUInt8).device(ctx.device);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(ctx.device);
    st->obs = torch::zeros({steps, n, depth, atari::kObsSide, atari::kObsSide}, u8);
    st->actions = torch::zeros({steps, n}, torch::TensorOptions().dtype(torch::kInt64).device(ctx.device));
    st->log_probs = torch::zeros({steps, n}, f32);
    st->values = torch::zeros({steps, n}, f32);
    st->rewards.assign(static_cast<std::size_t>(steps) * n, 0.0f);
    st->dones.assign(static_cast<std::size_t>(steps) * n, 0);
    const torch::Device device = ctx.device;

    // The workers' current observations, as a CPU tensor over the shared mapping (no copy).
    auto current_obs = [st, n, depth] {
      return torch::from_blob(const_cast<std::uint8_t*>(st->envs->observations().data()),
                              {n, depth, atari::kObsSide, atari::kObsSide}, torch::kUInt8);
    };

    core::Workload work;
    work.items_per_iteration = static_cast<double>(n) * steps;
    work.step = [=](core::Iteration& it) {
      State& s = *st;
      std::vector<int> actions(n);
      for (int t = 0; t < steps; ++t) {
        it.compute([&] {
          const auto t0 = std::chrono::steady_clock::now();
          torch::NoGradGuard no_grad;
          s.obs[t].copy_(current_obs());
          auto [logits, value] = s.net->forward(s.obs[t]);
          auto a = torch::multinomial(torch::softmax(logits, -1), 1).squeeze(1);
          s.actions[t].copy_(a);
          s.log_probs[t].copy_(torch::log_softmax(logits, -1).gather(1, a.unsqueeze(1)).squeeze(1));
          s.values[t].copy_(value);
          const auto a_cpu = a.to(torch::kCPU);
          const auto acc = a_cpu.accessor<std::int64_t, 1>();
          for (int e = 0; e < n; ++e) actions[e] = static_cast<int>(acc[e]);
          s.inference_s += seconds_since(t0);
        });
        it.wait([&] {
          const auto t0 = std::chrono::steady_clock::now();
          s.envs->step_async(actions);
          s.envs->step_wait();
          std::copy(s.envs->rewards().begin(), s.envs->rewards().end(), s.rewards.begin() + t * n);
          std::copy(s.envs->dones().begin(), s.envs->dones().end(), s.dones.begin() + t * n);
          s.env_wait_s += seconds_since(t0);
        });
        for (const auto& ep : s.envs->take_episodes()) {
          ++s.episodes;
          s.score_sum += ep.score;
          s.episode_steps_sum += static_cast<double>(ep.steps);
          s.recent_scores.push_back(ep.score);
          if (s.recent_scores.size() > 100) s.recent_scores.pop_front();
        }
      }
      s.agent_steps += static_cast<long>(n) * steps;
      auto loss = it.compute([&] {
        const auto t0 = std::chrono::steady_clock::now();
        torch::Tensor last_values;
        {
          torch::NoGradGuard no_grad;
          last_values = s.net->forward(current_obs().to(device)).second.to(torch::kCPU).contiguous();
        }
        const auto values_cpu = s.values.to(torch::kCPU).contiguous();
        const auto adv_vec =
            atari::gae_advantages(s.rewards, {values_cpu.data_ptr<float>(), static_cast<std::size_t>(steps) * n},
                                  s.dones, {last_values.data_ptr<float>(), static_cast<std::size_t>(n)}, n,
                                  static_cast<float>(ppo.gamma), static_cast<float>(ppo.gae_lambda));
        const long batch = static_cast<long>(steps) * n;
        const auto advantages =
            torch::from_blob(const_cast<float*>(adv_vec.data()), {batch}, torch::kFloat32).to(device);
        const auto returns = advantages + s.values.reshape({batch});
        const auto b_obs = s.obs.reshape({batch, depth, atari::kObsSide, atari::kObsSide});
        const auto b_actions = s.actions.reshape({batch});
        const auto b_log_probs = s.log_probs.reshape({batch});
        const long mb = batch / ppo.minibatches;
        torch::Tensor last;
        for (int epoch = 0; epoch < ppo.epochs; ++epoch) {
          const auto perm = torch::randperm(batch, torch::TensorOptions().dtype(torch::kInt64).device(device));
          for (int k = 0; k < ppo.minibatches; ++k) {
            const auto idx = perm.slice(0, k * mb, k + 1 == ppo.minibatches ? batch : (k + 1) * mb);
            auto [logits, value] = s.net->forward(b_obs.index_select(0, idx));
            const auto log_p = torch::log_softmax(logits, -1);
            const auto new_log_prob = log_p.gather(1, b_actions.index_select(0, idx).unsqueeze(1)).squeeze(1);
            const auto entropy = -(log_p.exp() * log_p).sum(-1).mean();
            auto adv = advantages.index_select(0, idx);
            if (adv.size(0) > 1) adv = (adv - adv.mean()) / (adv.std() + 1e-8);
            const auto ratio = torch::exp(new_log_prob - b_log_probs.index_select(0, idx));
            const auto policy_loss =
                -torch::min(ratio * adv, torch::clamp(ratio, 1.0 - ppo.clip, 1.0 + ppo.clip) * adv).mean();
            const auto value_loss = 0.5 * (returns.index_select(0, idx) - value).pow(2).mean();
            const auto total = policy_loss + ppo.value_coef * value_loss - ppo.entropy_coef * entropy;
            s.optimizer->zero_grad();
            total.backward();
            torch::nn::utils::clip_grad_norm_(s.net->parameters(), ppo.max_grad_norm);
            s.optimizer->step();
            last = total.detach();
          }
        }
        ++s.updates;
        s.update_s += seconds_since(t0);
        return last;
      });
      it.set_loss(bench::deferred_loss(loss));
    };
    // --eval-episodes: whole episodes on fresh environments (seeds apart from
    // training's, the same for both policies), the first ceil(N / workers) of
    // each worker, so that no episode is cut or chosen by its length.
    const std::uint64_t eval_seed = env.seed + 500000;
    enum class Policy { kSampled, kGreedy, kRandom };
    auto play = [=](Policy policy) {
      State& s = *st;
      atari::EnvConfig ec = env;
      ec.seed = eval_seed;
      const int workers = std::min(n, eval_episodes);
      const int per_worker = (eval_episodes + workers - 1) / workers;
      atari::EnvWorkers w(workers, ec);
      std::mt19937_64 rng(eval_seed);
      std::uniform_int_distribution<int> uniform(0, atari::kActionCount - 1);
      std::vector<std::vector<int>> got(static_cast<std::size_t>(workers));
      std::vector<int> actions(static_cast<std::size_t>(workers));
      int full = 0;
      while (full < workers) {
        if (const int sig = core::stop_signal()) throw core::Interrupted(sig);
        if (policy == Policy::kRandom) {
          for (auto& a : actions) a = uniform(rng);
        } else {
          torch::NoGradGuard no_grad;
          const auto obs = torch::from_blob(const_cast<std::uint8_t*>(w.observations().data()),
                                            {workers, depth, atari::kObsSide, atari::kObsSide}, torch::kUInt8);
          const auto logits = s.net->forward(obs.to(device)).first;
          const auto a = (policy == Policy::kGreedy ? logits.argmax(-1)
                                                    : torch::multinomial(torch::softmax(logits, -1), 1).squeeze(1))
                             .to(torch::kCPU);
          const auto acc = a.accessor<std::int64_t, 1>();
          for (int e = 0; e < workers; ++e) actions[e] = static_cast<int>(acc[e]);
        }
        w.step_async(actions);
        w.step_wait();
        for (const auto& ep : w.take_episodes()) {
          auto& mine = got[static_cast<std::size_t>(ep.env)];
          if (static_cast<int>(mine.size()) < per_worker) {
            mine.push_back(ep.score);
            if (static_cast<int>(mine.size()) == per_worker) ++full;
          }
        }
      }
      std::vector<int> scores;  // round by round, the first N
      for (int k = 0; k < per_worker; ++k)
        for (int e = 0; e < workers && static_cast<int>(scores.size()) < eval_episodes; ++e)
          scores.push_back(got[static_cast<std::size_t>(e)][static_cast<std::size_t>(k)]);
      return return_summary(scores);
    };
    if (eval_episodes > 0) {
      work.after_loop = [=] {
        State& s = *st;
        s.net->eval();
        auto trained = play(Policy::kSampled);
        auto greedy = play(Policy::kGreedy);
        auto random = play(Policy::kRandom);
        std::cout << fmt::format(
            "eval: {} episodes: trained policy's return {:.2f} (sd {:.2f}), its greedy actions' {:.2f} (sd {:.2f}), "
            "random policy's {:.2f} (sd {:.2f})\n",
            eval_episodes, trained["mean"].get<double>(), trained["sd"].get<double>(), greedy["mean"].get<double>(),
            greedy["sd"].get<double>(), random["mean"].get<double>(), random["sd"].get<double>());
        s.eval = {{"episodes", eval_episodes},
                  {"seed", eval_seed},
                  {"trained", std::move(trained)},
                  {"greedy", std::move(greedy)},
                  {"random", std::move(random)}};
      };
    }
    work.finish = [=, game = env.game](nlohmann::json& report) {
      const State& s = *st;
      report["pipeline"] = {{"source", "environment"},
                            {"env", "mlbench-pong"},
                            {"envs", n},
                            {"workers", "processes"},
                            {"frame_skip", env.wrap.frame_skip},
                            {"frame_stack", env.wrap.stack},
                            {"observation", "84x84 grayscale"},
                            {"ball_speed", game.ball_vx},
                            {"opponent_speed", game.opponent_speed},
                            {"ball_vy_max", game.ball_vy_max},
                            {"paddle_height", game.paddle_height},
                            {"agent_paddle_height", game.agent_height()},
                            {"serve_to_agent", game.serve_to_agent},
                            {"serve_row", game.serve_row},
                            {"max_frames", game.max_frames},
                            {"points", game.points_to_win}};
      auto& m = report["metrics"];
      m["env"] = "mlbench-pong";
      m["parameters"] = bench::parameter_count(*s.net);
      m["envs"] = n;
      m["rollout"] = steps;
      m["updates"] = s.updates;
      m["agent_steps"] = s.agent_steps;
      m["episodes"] = s.episodes;
      // null until an episode has ended.
      const double eps = static_cast<double>(s.episodes);
      m["mean_episode_score"] = s.episodes > 0 ? nlohmann::json(s.score_sum / eps) : nlohmann::json();
      m["mean_episode_steps"] = s.episodes > 0 ? nlohmann::json(s.episode_steps_sum / eps) : nlohmann::json();
      double recent = 0;
      for (int v : s.recent_scores) recent += v;
      m["recent_episode_score"] = s.recent_scores.empty()
                                      ? nlohmann::json()
                                      : nlohmann::json(recent / static_cast<double>(s.recent_scores.size()));
      m["eval"] = s.eval;
      // Totals over every iteration run (warm-up included): where a rollout's time went.
      m["inference_s"] = s.inference_s;
      m["update_s"] = s.update_s;
      m["env_wait_s"] = s.env_wait_s;
      const double all = s.inference_s + s.update_s + s.env_wait_s;
      m["env_wait_pct"] = all > 0 ? 100.0 * s.env_wait_s / all : 0.0;
    };
    return work;
  });
}
