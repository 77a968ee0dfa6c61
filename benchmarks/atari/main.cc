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
#include <optional>
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

// Everything atari's own flags set.
struct AtariOptions {
  PpoParams ppo;
  atari::EnvConfig env;
  int eval_episodes = 0;
};

void add_ppo_flags(core::BenchCli& cli, PpoParams& ppo) {
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
}

void add_game_flags(core::BenchCli& cli, atari::EnvConfig& env) {
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
}

void add_flags(core::BenchCli& cli, AtariOptions& opt) {
  add_ppo_flags(cli, opt.ppo);
  add_game_flags(cli, opt.env);
  cli.add_option("--reply-timeout", opt.env.reply_timeout_s, "Seconds a silent environment worker may take",
                 core::ArgKind::Runtime)
      ->check(core::number_above(0));
  cli.add_option("--eval-episodes", opt.eval_episodes,
                 "After the timed run, untimed: play N whole episodes with the trained policy (actions sampled "
                 "from it), N with its most likely actions and N with a uniformly random policy, on fresh "
                 "environments; metrics.eval")
      ->check(core::integer_in(0, 100000));
}

// After parsing: the checks across flags. Prints the error and returns 2 when one fails.
std::optional<int> validate(const core::BenchOptions& o, const AtariOptions& opt) {
  if (o.batch_size != 1) {
    std::cerr << "atari: error: --batch-size does not apply: a rollout is --envs x --rollout steps, split into "
                 "--minibatches\n";
    return 2;
  }
  const PpoParams& ppo = opt.ppo;
  if (ppo.minibatches > ppo.envs * ppo.rollout) {
    std::cerr << fmt::format("atari: error: --minibatches {} exceeds the {} steps of a rollout (--envs x --rollout)\n",
                             ppo.minibatches, ppo.envs * ppo.rollout);
    return 2;
  }
  return std::nullopt;
}

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

// The report's "pipeline" block: the environments and the game's settings.
nlohmann::json pipeline_block(const atari::EnvConfig& env, int envs) {
  const atari::PongParams& game = env.game;
  return {{"source", "environment"},
          {"env", "mlbench-pong"},
          {"envs", envs},
          {"workers", envs},  // one worker process per environment
          {"worker_kind", "processes"},
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
}

// A rollout flattened to one batch of --envs x --rollout steps, with its GAE
// advantages and returns: what the update's minibatches are drawn from.
struct RolloutBatch {
  torch::Tensor obs, actions, log_probs, advantages, returns;
};

// PPO's learner: the environments, the network and its optimiser, the rollout's
// storage and the tallies of the report. One iteration is one rollout
// (rollout_step for each step) and its update.
class PpoLearner {
 public:
  // `opt.env.seed` is the training environments' seed.
  PpoLearner(const AtariOptions& opt, const torch::Device& device);
  // One iteration: the rollout, then its update (the loss).
  void iterate(core::Iteration& it);
  // --eval-episodes, after the timed run: the trained policy sampled, its
  // greedy actions and a random policy, printed and kept for metrics.eval.
  void evaluate();
  void finish(nlohmann::json& report) const;

 private:
  enum class Policy { kSampled, kGreedy, kRandom };
  torch::Tensor current_obs() const;
  void rollout_step(core::Iteration& it, int t, std::vector<int>& actions);
  void act(int t, std::vector<int>& actions);
  void step_envs(int t, const std::vector<int>& actions);
  void tally_episodes();
  torch::Tensor update();
  std::vector<float> gae();
  torch::Tensor minibatch_step(const RolloutBatch& b, const torch::Tensor& idx);
  nlohmann::json play(Policy policy);
  void policy_actions(const atari::EnvWorkers& w, Policy policy, std::vector<int>& actions);
  std::uint64_t eval_seed() const { return opt_.env.seed + 500000; }

  const AtariOptions opt_;
  const torch::Device device_;
  const int n_, steps_, depth_;
  std::unique_ptr<atari::EnvWorkers> envs_;
  NatureCnn net_{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer_;
  torch::Tensor obs_, actions_, log_probs_,
      values_;  // rollout storage: steps x envs (x obs)
  std::vector<float> rewards_;
  std::vector<unsigned char> dones_;
  double inference_s_ = 0, update_s_ = 0, env_wait_s_ = 0;
  long updates_ = 0, agent_steps_ = 0, episodes_ = 0;
  double score_sum_ = 0, episode_steps_sum_ = 0;
  std::deque<int> recent_scores_;  // the last 100 episodes' scores
  nlohmann::json eval_;            // --eval-episodes' result (null without)
};

PpoLearner::PpoLearner(const AtariOptions& opt, const torch::Device& device)
    : opt_(opt), device_(device), n_(opt.ppo.envs), steps_(opt.ppo.rollout), depth_(opt.env.wrap.stack) {
  // The workers fork before the model exists: a child copies as little as possible.
  envs_ = std::make_unique<atari::EnvWorkers>(n_, opt_.env);
  net_ = NatureCnn(depth_, atari::kActionCount);
  net_->to(device_);
  optimizer_ =
      std::make_unique<torch::optim::Adam>(net_->parameters(), torch::optim::AdamOptions(opt_.ppo.lr).eps(1e-5));
  const auto u8 = torch::TensorOptions().dtype(torch::kUInt8).device(device_);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
  obs_ = torch::zeros({steps_, n_, depth_, atari::kObsSide, atari::kObsSide}, u8);
  actions_ = torch::zeros({steps_, n_}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
  log_probs_ = torch::zeros({steps_, n_}, f32);
  values_ = torch::zeros({steps_, n_}, f32);
  rewards_.assign(static_cast<std::size_t>(steps_) * n_, 0.0f);
  dones_.assign(static_cast<std::size_t>(steps_) * n_, 0);
}

// The workers' current observations, as a CPU tensor over the shared mapping (no copy).
torch::Tensor PpoLearner::current_obs() const {
  return torch::from_blob(const_cast<std::uint8_t*>(envs_->observations().data()),
                          {n_, depth_, atari::kObsSide, atari::kObsSide}, torch::kUInt8);
}

void PpoLearner::iterate(core::Iteration& it) {
  std::vector<int> actions(n_);
  for (int t = 0; t < steps_; ++t) rollout_step(it, t, actions);
  agent_steps_ += static_cast<long>(n_) * steps_;
  auto loss = it.compute([&] { return update(); });
  it.set_loss(bench::deferred_loss(loss));
}

// Step `t` of the rollout: the policy's actions (compute), the environments'
// step (the wait), and the episodes that ended.
void PpoLearner::rollout_step(core::Iteration& it, int t, std::vector<int>& actions) {
  it.compute([&] { act(t, actions); });
  it.wait([&] { step_envs(t, actions); });
  tally_episodes();
}

void PpoLearner::act(int t, std::vector<int>& actions) {
  const auto t0 = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  obs_[t].copy_(current_obs());
  auto [logits, value] = net_->forward(obs_[t]);
  auto a = torch::multinomial(torch::softmax(logits, -1), 1).squeeze(1);
  actions_[t].copy_(a);
  log_probs_[t].copy_(torch::log_softmax(logits, -1).gather(1, a.unsqueeze(1)).squeeze(1));
  values_[t].copy_(value);
  const auto a_cpu = a.to(torch::kCPU);
  const auto acc = a_cpu.accessor<std::int64_t, 1>();
  for (int e = 0; e < n_; ++e) actions[e] = static_cast<int>(acc[e]);
  inference_s_ += seconds_since(t0);
}

void PpoLearner::step_envs(int t, const std::vector<int>& actions) {
  const auto t0 = std::chrono::steady_clock::now();
  envs_->step_async(actions);
  envs_->step_wait();
  std::copy(envs_->rewards().begin(), envs_->rewards().end(), rewards_.begin() + t * n_);
  std::copy(envs_->dones().begin(), envs_->dones().end(), dones_.begin() + t * n_);
  env_wait_s_ += seconds_since(t0);
}

void PpoLearner::tally_episodes() {
  for (const auto& ep : envs_->take_episodes()) {
    ++episodes_;
    score_sum_ += ep.score;
    episode_steps_sum_ += static_cast<double>(ep.steps);
    recent_scores_.push_back(ep.score);
    if (recent_scores_.size() > 100) recent_scores_.pop_front();
  }
}

// The rollout's GAE advantages (steps x envs), bootstrapped from the value of
// the environments' current observations.
std::vector<float> PpoLearner::gae() {
  torch::Tensor last_values;
  {
    torch::NoGradGuard no_grad;
    last_values = net_->forward(current_obs().to(device_)).second.to(torch::kCPU).contiguous();
  }
  const auto values_cpu = values_.to(torch::kCPU).contiguous();
  return atari::gae_advantages(rewards_, {values_cpu.data_ptr<float>(), static_cast<std::size_t>(steps_) * n_}, dones_,
                               {last_values.data_ptr<float>(), static_cast<std::size_t>(n_)}, n_,
                               static_cast<float>(opt_.ppo.gamma), static_cast<float>(opt_.ppo.gae_lambda));
}

// The update: --epochs passes over the rollout in --minibatches random
// minibatches. Returns the last minibatch's loss.
torch::Tensor PpoLearner::update() {
  const auto t0 = std::chrono::steady_clock::now();
  const PpoParams& ppo = opt_.ppo;
  const auto adv_vec = gae();
  const long batch = static_cast<long>(steps_) * n_;
  RolloutBatch b;
  // Over adv_vec's memory on the CPU (no copy): adv_vec outlives the epochs.
  b.advantages = torch::from_blob(const_cast<float*>(adv_vec.data()), {batch}, torch::kFloat32).to(device_);
  b.returns = b.advantages + values_.reshape({batch});
  b.obs = obs_.reshape({batch, depth_, atari::kObsSide, atari::kObsSide});
  b.actions = actions_.reshape({batch});
  b.log_probs = log_probs_.reshape({batch});
  const long mb = batch / ppo.minibatches;
  torch::Tensor last;
  for (int epoch = 0; epoch < ppo.epochs; ++epoch) {
    const auto perm = torch::randperm(batch, torch::TensorOptions().dtype(torch::kInt64).device(device_));
    for (int k = 0; k < ppo.minibatches; ++k) {
      last = minibatch_step(b, perm.slice(0, k * mb, k + 1 == ppo.minibatches ? batch : (k + 1) * mb));
    }
  }
  ++updates_;
  update_s_ += seconds_since(t0);
  return last;
}

// One optimiser step on the clipped objective over the rows `idx` of the
// rollout; returns its loss.
torch::Tensor PpoLearner::minibatch_step(const RolloutBatch& b, const torch::Tensor& idx) {
  const PpoParams& ppo = opt_.ppo;
  auto [logits, value] = net_->forward(b.obs.index_select(0, idx));
  const auto log_p = torch::log_softmax(logits, -1);
  const auto new_log_prob = log_p.gather(1, b.actions.index_select(0, idx).unsqueeze(1)).squeeze(1);
  const auto entropy = -(log_p.exp() * log_p).sum(-1).mean();
  auto adv = b.advantages.index_select(0, idx);
  if (adv.size(0) > 1) adv = (adv - adv.mean()) / (adv.std() + 1e-8);
  const auto ratio = torch::exp(new_log_prob - b.log_probs.index_select(0, idx));
  const auto policy_loss = -torch::min(ratio * adv, torch::clamp(ratio, 1.0 - ppo.clip, 1.0 + ppo.clip) * adv).mean();
  const auto value_loss = 0.5 * (b.returns.index_select(0, idx) - value).pow(2).mean();
  const auto total = policy_loss + ppo.value_coef * value_loss - ppo.entropy_coef * entropy;
  optimizer_->zero_grad();
  total.backward();
  torch::nn::utils::clip_grad_norm_(net_->parameters(), ppo.max_grad_norm);
  optimizer_->step();
  return total.detach();
}

// The actions of the trained policy (sampled or greedy) on `w`'s observations.
void PpoLearner::policy_actions(const atari::EnvWorkers& w, Policy policy, std::vector<int>& actions) {
  const auto workers = static_cast<std::int64_t>(actions.size());
  torch::NoGradGuard no_grad;
  const auto obs = torch::from_blob(const_cast<std::uint8_t*>(w.observations().data()),
                                    {workers, depth_, atari::kObsSide, atari::kObsSide}, torch::kUInt8);
  const auto logits = net_->forward(obs.to(device_)).first;
  const auto a =
      (policy == Policy::kGreedy ? logits.argmax(-1) : torch::multinomial(torch::softmax(logits, -1), 1).squeeze(1))
          .to(torch::kCPU);
  const auto acc = a.accessor<std::int64_t, 1>();
  for (std::int64_t e = 0; e < workers; ++e) actions[static_cast<std::size_t>(e)] = static_cast<int>(acc[e]);
}

// --eval-episodes: whole episodes on fresh environments (seeds apart from
// training's, the same for both policies), the first ceil(N / workers) of
// each worker, so that no episode is cut or chosen by its length.
nlohmann::json PpoLearner::play(Policy policy) {
  const int eval_episodes = opt_.eval_episodes;
  atari::EnvConfig ec = opt_.env;
  ec.seed = eval_seed();
  const int workers = std::min(n_, eval_episodes);
  const int per_worker = (eval_episodes + workers - 1) / workers;
  atari::EnvWorkers w(workers, ec);
  std::mt19937_64 rng(eval_seed());
  std::uniform_int_distribution<int> uniform(0, atari::kActionCount - 1);
  std::vector<std::vector<int>> got(static_cast<std::size_t>(workers));
  std::vector<int> actions(static_cast<std::size_t>(workers));
  int full = 0;
  while (full < workers) {
    if (const int sig = core::stop_signal()) throw core::Interrupted(sig);
    if (policy == Policy::kRandom) {
      for (auto& a : actions) a = uniform(rng);
    } else {
      policy_actions(w, policy, actions);
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
}

void PpoLearner::evaluate() {
  net_->eval();
  auto trained = play(Policy::kSampled);
  auto greedy = play(Policy::kGreedy);
  auto random = play(Policy::kRandom);
  std::cout << fmt::format(
      "eval: {} episodes: trained policy's return {:.2f} (sd {:.2f}), its greedy actions' {:.2f} (sd {:.2f}), "
      "random policy's {:.2f} (sd {:.2f})\n",
      opt_.eval_episodes, trained["mean"].get<double>(), trained["sd"].get<double>(), greedy["mean"].get<double>(),
      greedy["sd"].get<double>(), random["mean"].get<double>(), random["sd"].get<double>());
  eval_ = {{"episodes", opt_.eval_episodes},
           {"seed", eval_seed()},
           {"trained", std::move(trained)},
           {"greedy", std::move(greedy)},
           {"random", std::move(random)}};
}

void PpoLearner::finish(nlohmann::json& report) const {
  report["pipeline"] = pipeline_block(opt_.env, n_);
  auto& m = report["metrics"];
  m["env"] = "mlbench-pong";
  m["parameters"] = bench::parameter_count(*net_);
  m["envs"] = n_;
  m["rollout"] = steps_;
  m["updates"] = updates_;
  m["agent_steps"] = agent_steps_;
  m["episodes"] = episodes_;
  // null until an episode has ended.
  const double eps = static_cast<double>(episodes_);
  m["mean_episode_score"] = episodes_ > 0 ? nlohmann::json(score_sum_ / eps) : nlohmann::json();
  m["mean_episode_steps"] = episodes_ > 0 ? nlohmann::json(episode_steps_sum_ / eps) : nlohmann::json();
  double recent = 0;
  for (int v : recent_scores_) recent += v;
  m["recent_episode_score"] =
      recent_scores_.empty() ? nlohmann::json() : nlohmann::json(recent / static_cast<double>(recent_scores_.size()));
  m["eval"] = eval_;
  // Totals over every iteration run (warm-up included): where a rollout's time went.
  m["inference_s"] = inference_s_;
  m["update_s"] = update_s_;
  m["env_wait_s"] = env_wait_s_;
  const double all = inference_s_ + update_s_ + env_wait_s_;
  m["env_wait_pct"] = all > 0 ? 100.0 * env_wait_s_ / all : 0.0;
}

int run(const core::BenchCli& cli, const AtariOptions& options) {
  return bench::run_benchmark(cli, MLBENCH_SOURCE_HASH, [&](const bench::TorchContext& ctx) {
    AtariOptions opt = options;
    opt.env.seed = static_cast<std::uint64_t>(cli.options().seed) * 1000;
    auto learner = std::make_shared<PpoLearner>(opt, ctx.device);
    core::Workload work;
    work.items_per_iteration = static_cast<double>(opt.ppo.envs) * opt.ppo.rollout;
    work.step = [learner](core::Iteration& it) { learner->iterate(it); };
    if (opt.eval_episodes > 0) work.after_loop = [learner] { learner->evaluate(); };
    work.finish = [learner](nlohmann::json& report) { learner->finish(report); };
    return work;
  });
}

}  // namespace

int main(int argc, char** argv) {
  core::BenchCli cli("atari", "atari: PPO from pixels on mlbench-pong, environments in worker processes",
                     {.batch_size = 1, .repeat = 15, .number = 2});
  AtariOptions opt;
  add_flags(cli, opt);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (auto rc = validate(cli.options(), opt)) return *rc;
  return run(cli, opt);
}
