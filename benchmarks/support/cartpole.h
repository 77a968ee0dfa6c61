// The classic CartPole environment (Barto, Sutton & Anderson 1983, as in
// OpenAI Gym's CartPole-v0): cart and pole dynamics integrated with explicit
// Euler steps, failure when the pole leans past 12 degrees or the cart leaves
// +-2.4, episodes capped at 200 steps. Plain C++: the cart benchmark's
// environment, unit-tested against hand-computed steps.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <vector>

namespace mlbench::bench {

struct CartPoleParams {
  double gravity = 9.8;
  double mass_cart = 1.0;
  double mass_pole = 0.1;
  double half_pole_length = 0.5;  // "length" in Gym: half the pole's length
  double force = 10.0;
  double tau = 0.02;              // seconds per step
  double theta_threshold = 12.0 * 2.0 * 3.14159265358979323846 / 360.0;
  double x_threshold = 2.4;
  int max_steps = 200;
};

// x, x_dot, theta, theta_dot
using CartPoleState = std::array<double, 4>;

// One Euler step of the dynamics with action 0 (push left) or 1 (push right).
CartPoleState cartpole_dynamics(const CartPoleState& s, int action, const CartPoleParams& p = {});

class CartPole {
 public:
  explicit CartPole(std::uint64_t seed, CartPoleParams params = {});

  // Starts an episode: every state variable uniform in [-0.05, 0.05].
  const CartPoleState& reset();
  // Starts an episode from a given state (tests).
  void reset_to(const CartPoleState& s);

  struct StepResult {
    const CartPoleState& state;
    double reward;  // 1 for every step taken, as in Gym
    bool done;      // failed or reached max_steps
    bool failed;    // pole fell or cart out of bounds
  };
  StepResult step(int action);

  const CartPoleState& state() const { return state_; }
  int steps() const { return steps_; }
  const CartPoleParams& params() const { return params_; }

 private:
  CartPoleParams params_;
  std::mt19937_64 rng_;
  CartPoleState state_{};
  int steps_ = 0;
};

// REINFORCE's returns G_t = r_t + gamma * G_{t+1}; standardised (mean 0,
// sd 1 with eps 1e-9 on the sd of the sample) as PyTorch's reinforce.py does.
std::vector<double> discounted_returns(const std::vector<double>& rewards, double gamma, bool standardise = true);

}  // namespace mlbench::bench
